"""One-shot shipping of one CCD (read -> compress -> send, one sender per process): only the
reference path ``benchmarks/edge.py`` measures ``EdgeService`` against (no journal, scheduler or
crash isolation).
"""

from __future__ import annotations

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
from obsingest.messages import utcnow
from producers.compress import compress_fits
from producers.edge.ccd import warm_up
from producers.sender import Sender, open_sender


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


def _start_worker(barrier: Any, sender_url: str) -> None:
    warm_up()
    _sender(sender_url)  # connect now: the first CCD should not pay for it
    barrier.wait(timeout=300)


def warm_pool(workers: int, sender_url: str) -> ProcessPoolExecutor:
    """A process pool whose every worker has started, warmed up and opened its sender before
    this returns: ProcessPoolExecutor spawns workers lazily, which the first exposure's latency
    figures would include."""
    ctx = get_context("spawn")
    barrier = ctx.Barrier(workers)
    pool = ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_start_worker, initargs=(barrier, sender_url)
    )
    for future in [pool.submit(os.getpid) for _ in range(workers)]:
        future.result()
    return pool


def ship_ccd(job: ShipJob) -> ShipResult:
    data_id = DataId(job.instrument, job.exposure, job.detector)
    # a path: the codec memory-maps it instead of allocating 75 MB per CCD
    fz = compress_fits(Path(job.raw_path), threads=1)
    compressed_time = utcnow()
    t1 = time.perf_counter()
    _sender(job.sender_url).send(data_id, fz, job.readout_time, compressed_time)
    return ShipResult(compressed_time, time.perf_counter() - t1)
