"""An edge ``Outcome`` as the harness's ``TransferRecord``: pure, so the figures are unit-tested.

The edge worker times its own steps (when it took the CCD, read, compress, send, acknowledged;
CPU seconds of read + compress and of send); the record keeps the report's columns: start = the
worker took it, read end, compressed, end = acknowledged by the destination, and the readout
the exposure was scheduled at (so queueing for a worker is readout -> start).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from producers.transfer.stats import TransferRecord


def record_of(
    outcome: Any,
    detector: int,
    exposure: int,
    exposure_index: int,
    readout: datetime,
    workers: dict[int, int],
) -> TransferRecord:
    """``outcome``: a ``producers.edge.Outcome``; ``workers``: worker pid -> index."""
    if not outcome.ok:
        reason = f"{outcome.reason}: " if outcome.reason else ""
        return TransferRecord(
            data_id=outcome.key,
            worker=-1,
            detector=detector,
            exposure=exposure,
            exposure_index=exposure_index,
            readout=readout,
            start=readout,
            read_end=readout,
            compressed=readout,
            end=readout,
            bytes=0,
            raw_bytes=0,
            status="failed",
            error=f"{outcome.state}: {reason}{outcome.error or 'not acknowledged'}",
        )
    start = outcome.started_time or readout
    return TransferRecord(
        data_id=outcome.key,
        worker=workers.get(outcome.worker_pid, -1),
        detector=detector,
        exposure=exposure,
        exposure_index=exposure_index,
        readout=readout,
        start=start,
        read_end=start + timedelta(seconds=outcome.read_seconds),
        compressed=outcome.compressed_time or start,
        end=outcome.acked_time or start,
        bytes=outcome.size,
        raw_bytes=outcome.raw_size,
        status=outcome.status,
        cpu_seconds=round(outcome.cpu_seconds, 4),
        compress_cpu_seconds=round(outcome.read_compress_cpu_seconds, 4),
        send_cpu_seconds=round(outcome.send_cpu_seconds, 4),
        worker_pid=outcome.worker_pid,
    )
