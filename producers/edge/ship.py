"""One-shot shipping of one CCD (read -> compress -> send, one sender per process): only the
reference path ``benchmarks/edge.py`` measures ``EdgeService`` against (no journal, scheduler or
crash isolation).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from obsingest import defaults
from obsingest.dataid import DataId
from obsingest.errors import RetriableError
from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow
from obsingest.retry import EDGE_RESEND, Attempt, RetriesExhausted, Transient, call_with_retries
from producers.compress import compress_fits
from producers.edge.ccd import warm_up
from producers.sender import Sender, SendResult, open_sender

log = get_logger("obsingest.edge")


@dataclass(frozen=True)
class ShipJob:
    raw_path: str
    instrument: str
    exposure: int
    detector: int
    readout_time: datetime
    sender_url: str  # file://DIR, gs://BUCKET or kafka://HOST:PORT/TOPIC


@dataclass(frozen=True)
class ShipResult:
    """What the benchmark reads: when the CCD was compressed and how long its send took."""

    compressed_time: datetime
    send_seconds: float


@cache
def _sender(url: str) -> Sender:
    """One sender per process and destination: connections stay warm between CCDs."""
    return open_sender(url, defaults.RAW_PREFIX, defaults.QUARANTINE_PREFIX, producer=f"edge-{os.getpid()}")


def _start_worker(barrier: Any, sender_url: str | None) -> None:
    warm_up()
    if sender_url is not None:
        _sender(sender_url)  # connect now: the first CCD should not pay for it
    barrier.wait(timeout=300)


def warm_pool(workers: int, sender_url: str | None = None) -> ProcessPoolExecutor:
    """A process pool whose every worker has started, warmed up and (given ``sender_url``)
    opened its sender before this returns: ProcessPoolExecutor spawns workers lazily, which the
    first exposure's latency figures would include."""
    ctx = get_context("spawn")
    barrier = ctx.Barrier(workers)
    pool = ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_start_worker, initargs=(barrier, sender_url)
    )
    for future in [pool.submit(os.getpid) for _ in range(workers)]:
        future.result()
    return pool


def _send_with_retries(job: ShipJob, data_id: DataId, data: bytes, compressed_time: datetime) -> SendResult:
    """A CCD late is still a CCD: after a send gave up, send again with backoff (the store is
    create-once, the assembler ignores duplicate chunks)."""
    sender = _sender(job.sender_url)

    def on_retry(attempt: Attempt) -> None:
        log_event(
            log,
            "edge.send_retry",
            logging.WARNING,
            data_id=data_id.key,
            attempt=attempt.number,
            error=str(attempt.error),
        )

    try:
        return call_with_retries(
            lambda _left: sender.send(data_id, data, job.readout_time, compressed_time),
            lambda exc: Transient("send") if isinstance(exc, RetriableError) else None,
            EDGE_RESEND,
            on_retry=on_retry,
        )
    except RetriesExhausted as gave_up:  # the last send's own error, as the caller expects
        raise gave_up.last from gave_up.last.__cause__


def ship_ccd(job: ShipJob) -> ShipResult:
    data_id = DataId(job.instrument, job.exposure, job.detector)
    # a path: the codec memory-maps it instead of allocating 75 MB per CCD
    fz = compress_fits(Path(job.raw_path), threads=1)
    compressed_time = utcnow()
    t1 = time.perf_counter()
    _send_with_retries(job, data_id, fz, compressed_time)
    return ShipResult(compressed_time, time.perf_counter() - t1)
