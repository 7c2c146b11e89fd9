"""Demo transport (b): edge workers stream chunks to Kafka; an assembler process stores files.
Each run has its own topics and consumer group (deleted on close), so runs never mix."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from infra.local.provision import (
    CHUNK_TOPIC_PARTITIONS,
    KafkaNotRunning,
    create_chunk_topics,
    delete_kafka_topics,
    require_kafka,
)
from obsingest.logs import get_logger, log_event
from obsingest_cli.demo.environment import DemoEnvironment

log = get_logger("obsingest.demo.kafka")


def kafka_bootstrap() -> str:
    """KAFKA_BOOTSTRAP_SERVERS, else the local stack's Kafka endpoint."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        return env
    from infra.local.stack import load_settings

    settings = load_settings()
    return f"{settings.host}:{settings.kafka_port}"


class KafkaTransport:
    """``DemoTransport`` over Kafka. The assembler is its own process, as in production (no
    shared interpreter lock or crash with the facility); its log tail is shown if it fails."""

    def __init__(self, env: DemoEnvironment) -> None:
        self.env = env
        self.bootstrap = kafka_bootstrap()
        run = uuid.uuid4().hex[:12]
        self.topic = f"ccd-chunks-demo-{run}"
        self.dlq_topic = f"{self.topic}-dlq"
        self.group_id = f"ccd-assembler-demo-{run}"
        self.sender_url = f"kafka://{self.bootstrap}/{self.topic}"
        self._logdir = Path(tempfile.mkdtemp(prefix="obsingest-assembler-"))
        self.log_path = self._logdir / "assembler.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        from functions.assembler.main import command

        require_kafka(self.bootstrap)
        partitions = {self.topic: CHUNK_TOPIC_PARTITIONS, self.dlq_topic: 1}
        create_chunk_topics(self.bootstrap, partitions)
        argv = command(self.bootstrap, self.topic, self.dlq_topic, self.group_id, self.env.store_url)
        env = {
            **os.environ,
            "OBSINGEST_ASSEMBLER_PREFIX": self.env.store_settings.prefix,
            "OBSINGEST_ASSEMBLER_QUARANTINE_PREFIX": self.env.store_settings.quarantine_prefix,
        }
        with open(self.log_path, "wb") as log_file:
            self._proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env)
        # Edge workers start sending right away: join the group first, so the first exposure's
        # latency is not a consumer-group rebalance figure.
        deadline = time.monotonic() + 30
        while not self._assigned():
            self._check_alive()
            if time.monotonic() > deadline:
                raise KafkaNotRunning(
                    f"the assembler got no partition of {self.topic} within 30 s{self._log_tail()}"
                )
            time.sleep(0.05)
        log_event(
            log,
            "demo.kafka.started",
            topic=self.topic,
            bootstrap=self.bootstrap,
            assembler_pid=self._proc.pid,
            assembler_log=str(self.log_path),
        )

    def _log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def _assigned(self) -> bool:
        """Whether the assembler logged an assignment with at least one partition."""
        for line in self._log_lines():
            if '"assembler.assigned"' in line:
                with contextlib.suppress(ValueError):
                    if json.loads(line).get("partitions"):
                        return True
        return False

    def _log_tail(self, lines: int = 20) -> str:
        tail = self._log_lines()[-lines:]
        return "; assembler log tail:\n" + "\n".join(tail) if tail else ""

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"the assembler exited with status {self._proc.returncode}{self._log_tail()}")

    def processes(self) -> dict[str, list[int]]:
        return {"assembler": [self._proc.pid]} if self._proc is not None else {}

    def finish(self, timeout: float) -> None:
        """Wait until the group's committed offsets reach the end of every partition: since
        commits never pass an unfinished file, every CCD sent is then stored (or dead-lettered)."""
        from functions.assembler.kafka_clients import group_lag

        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            lag = group_lag(self.bootstrap, self.group_id, self.topic)
            if lag == 0:
                self._check_alive()  # it may have failed right after a commit
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"assembler still {lag} records behind after {timeout} s{self._log_tail()}"
                )
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the assembler cleanly (SIGTERM: it commits what is safe and leaves the group),
        then delete the run's topics."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._logdir, ignore_errors=True)
        try:
            delete_kafka_topics(self.bootstrap, [self.topic, self.dlq_topic])
        except Exception as exc:  # leftovers are harmless: unique names
            log_event(log, "demo.kafka.cleanup_failed", logging.WARNING, error=str(exc))
