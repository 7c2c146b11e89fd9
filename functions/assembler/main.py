"""The assembler as a process (``python -m functions.assembler``, ``obsingest assembler``): one
consumer-group member. SIGTERM/SIGINT commit safe offsets and leave the group; a SIGKILL loses
nothing; an outage of the store or the DLQ is waited out by a new instance, no supervisor needed.
Only the standard library is imported at module level.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The assembler's options; every one defaults to its OBSINGEST_ASSEMBLER_* variable."""
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (or KAFKA_BOOTSTRAP_SERVERS)")
    p.add_argument("--topic", help="chunks topic (default ccd-chunks)")
    p.add_argument("--dlq-topic", help="dead-letter topic (default ccd-chunks-dlq)")
    p.add_argument("--group", dest="group_id", help="consumer group id (default ccd-assembler)")
    p.add_argument("--store", dest="store_url", help="file://DIR or gs://BUCKET")
    p.add_argument(
        "--memory-limit", dest="memory_limit_bytes", type=int, help="payload bytes held for incomplete files"
    )
    p.add_argument(
        "--incomplete-timeout",
        dest="incomplete_timeout_s",
        type=float,
        help="seconds an open file may idle before it is dead-lettered",
    )
    p.add_argument(
        "--idle-exit", type=float, help="exit after this many seconds without records and open files"
    )
    p.add_argument("--log-level", default="INFO")


def run(args: argparse.Namespace) -> int:
    import logging

    from functions.assembler.service import AssemblerService
    from functions.assembler.settings import AssemblerSettings
    from obsingest import logs
    from obsingest.errors import RetriableError
    from obsingest.logs import get_logger, log_event
    from obsingest.metrics import get_metrics
    from obsingest.metrics_http import serve_metrics
    from obsingest.retry import RetryPolicy

    #: a store or DLQ outage outlasting an instance's retries stops it without committing past
    #: what it could not write; a new instance resumes from the commit, for as long as it lasts
    RESTART = RetryPolicy(base_delay=1.0, max_delay=30.0, deadline=None)
    log = get_logger("obsingest.assembler")

    logs.configure(args.log_level)
    # an option given overrides its variable (options are named as fields)
    given = {k: v for k, v in vars(args).items() if k in AssemblerSettings.model_fields and v is not None}
    settings = AssemblerSettings(**given)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    metrics = get_metrics()  # started by the service

    metrics_server = serve_metrics()  # /metrics on OBSINGEST_METRICS_PORT (0: off)
    failed = 0  # instances stopped in a row without finishing a file: the outage's length
    try:
        while True:
            service: AssemblerService | None = None
            try:
                service = AssemblerService(settings, metrics=metrics)
                service.run(stop, idle_exit_s=args.idle_exit)
                return 0
            except RetriableError as exc:
                if stop.is_set():
                    raise
                failed = 1 if service is not None and service.progressed else failed + 1
                delay = RESTART.backoff(failed)
                log_event(log, "assembler.restarting", logging.ERROR, error=str(exc), delay_s=round(delay, 1))
                if stop.wait(delay):  # a SIGTERM ends the wait
                    return 0
    finally:
        if metrics_server is not None:
            metrics_server.close()


def command(bootstrap: str, topic: str, dlq_topic: str, group: str, store_url: str) -> list[str]:
    """The argv that runs one assembler as its own process."""
    argv = [sys.executable, "-m", "functions.assembler", "--bootstrap-servers", bootstrap]
    argv += ["--topic", topic, "--dlq-topic", dlq_topic, "--group", group, "--store", store_url]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m functions.assembler",
        description="Kafka chunk assembler: CcdChunk records -> files in the object store.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
