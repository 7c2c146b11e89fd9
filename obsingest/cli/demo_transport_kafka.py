"""Demo transport (b): edge workers stream chunks to Kafka; an assembler thread stores files.

Each run gets its own chunks and DLQ topics and consumer group, so runs never see each other's
records; the topics are deleted on close. The assembler writes to the environment's store, whose
finalize notifications register the files through the normal path.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from obsingest.cli.demo_envs import DemoEnvironment
from obsingest.errors import ServiceUnavailable
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.demo.kafka")

#: Partitions of the per-run chunks topic: room for a second assembler instance.
PARTITIONS = 6
MAX_RECORD_BYTES = 16 * 1024 * 1024


class KafkaNotRunning(ServiceUnavailable):
    """No broker answers at the bootstrap address."""

    reason = "kafka-unavailable"


def kafka_bootstrap() -> str:
    """KAFKA_BOOTSTRAP_SERVERS, else the local stack's Kafka endpoint."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        return env
    from obsingest.stack import load_settings

    settings = load_settings()
    return f"{settings.host}:{settings.kafka_port}"


def require_kafka(bootstrap: str, timeout: float = 5.0) -> None:
    """Fail clearly, naming the fix, when no broker answers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as exc:
        raise KafkaNotRunning(
            f"Kafka is not reachable at {bootstrap} ({exc}); run `obsingest stack up` "
            "(or set KAFKA_BOOTSTRAP_SERVERS)"
        ) from None
    if not metadata.brokers:
        raise KafkaNotRunning(f"Kafka at {bootstrap} lists no broker; run `obsingest stack up`")


class KafkaTransport:
    """``DemoTransport`` over Kafka: sender URL, assembler lifecycle, wait-until-stored."""

    def __init__(self, env: DemoEnvironment, bootstrap: str | None = None) -> None:
        self.env = env
        self.bootstrap = bootstrap or kafka_bootstrap()
        run = uuid.uuid4().hex[:12]
        self.topic = f"ccd-chunks-demo-{run}"
        self.dlq_topic = f"{self.topic}-dlq"
        self.group_id = f"ccd-assembler-demo-{run}"
        self.sender_url = f"kafka://{self.bootstrap}/{self.topic}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._service = None
        self._error: BaseException | None = None

    def start(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        from functions.assembler.service import AssemblerService
        from functions.assembler.settings import AssemblerSettings

        require_kafka(self.bootstrap)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        config = {"max.message.bytes": str(MAX_RECORD_BYTES)}
        futures = admin.create_topics(
            [
                NewTopic(
                    self.topic, num_partitions=PARTITIONS, replication_factor=1, config=config
                ),
                NewTopic(self.dlq_topic, num_partitions=1, replication_factor=1, config=config),
            ],
            operation_timeout=30,
        )
        for future in futures.values():
            future.result(timeout=30)
        settings = AssemblerSettings(
            bootstrap_servers=self.bootstrap,
            topic=self.topic,
            dlq_topic=self.dlq_topic,
            group_id=self.group_id,
            store_url=self.env.store_url,
            prefix=self.env.store_settings.prefix,
            quarantine_prefix=self.env.store_settings.quarantine_prefix,
        )
        self._service = AssemblerService(settings)
        self._thread = threading.Thread(target=self._run, name="kafka-assembler", daemon=True)
        self._thread.start()
        # Edge workers start sending right away: join the group first, so the first exposure's
        # latency is not a consumer-group rebalance figure.
        if not self._service.assigned.wait(timeout=30):
            raise KafkaNotRunning(f"the assembler got no partition of {self.topic} within 30 s")
        log_event(log, "demo.kafka.started", topic=self.topic, bootstrap=self.bootstrap)

    def _run(self) -> None:
        assert self._service is not None
        try:
            self._service.run(self._stop)
        except BaseException as exc:  # surfaced by finish()
            self._error = exc
            log_event(log, "demo.kafka.assembler_failed", logging.ERROR, error=str(exc))

    def lag(self) -> int:
        from functions.assembler.service import group_lag

        return group_lag(self.bootstrap, self.group_id, self.topic)

    def finish(self, timeout: float) -> None:
        """Wait until the group's committed offsets reach the end of every partition: since
        commits never pass an unfinished file, every CCD sent is then stored (or dead-lettered)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._error is not None:
                raise RuntimeError(f"the assembler failed: {self._error}") from self._error
            lag = self.lag()
            if lag == 0:
                if self._error is not None:  # it may have failed right after a commit
                    raise RuntimeError(f"the assembler failed: {self._error}") from self._error
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"assembler still {lag} records behind after {timeout} s")
            time.sleep(0.1)

    def close(self) -> None:
        from confluent_kafka.admin import AdminClient

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            for future in admin.delete_topics(
                [self.topic, self.dlq_topic], operation_timeout=10
            ).values():
                future.result(timeout=10)
        except Exception as exc:  # leftovers are harmless: unique names
            log_event(log, "demo.kafka.cleanup_failed", logging.WARNING, error=str(exc))
