"""One harness worker process: one detector, every exposure, on a shared wall-clock schedule.

Like the observatory's test (one process per CCD), each worker is its own process with its own
sender, kept open across exposures so that only the first transfer pays for connection set-up.
It warms up (imports, codec) before saying it is ready, then waits for the common start time and
at every readout moment reads its CCD from disk, compresses it (or takes the pre-compressed file)
and sends it. Every transfer is logged as one JSON line with its data id, start and end, and
reported to the parent through a queue.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from obsingest import logs
from obsingest.dataid import DataId
from producers.transfer.fitsheader import exposure_cards, retarget_primary_header
from producers.transfer.stats import TransferRecord

log = logs.get_logger("obsingest.producer.transfer")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything one worker needs; picklable, sent to a spawned process."""

    index: int
    instrument: str
    detector: int
    source: str  # raw .fits (compress) or .fits.fz (send as is)
    compress: bool
    threads: int
    sender_url: str
    prefix: str
    quarantine_prefix: str
    exposures: tuple[int, ...]
    interval: float
    log_path: str
    run_id: str


def _read(path: str, buf: bytearray | None = None) -> bytearray:
    """The whole file into one mutable buffer, reusing ``buf`` when it has the file's size.

    A DAQ client keeps its buffers; allocating 75 MB afresh per CCD would make every exposure
    pay ~18,000 page faults per worker, which on a small VM shows up as seconds of system time
    when 16 workers read at once.
    """
    size = os.path.getsize(path)
    if buf is None or len(buf) != size:
        buf = bytearray(size)
    with open(path, "rb", buffering=0) as fh:
        view = memoryview(buf)
        got = 0
        while got < size:
            n = fh.readinto(view[got:])
            if not n:
                raise OSError(f"{path}: short read ({got} of {size} bytes)")
            got += n
        view.release()
    return buf


def _sleep_until(moment: datetime) -> None:
    while (left := (moment - datetime.now(UTC)).total_seconds()) > 0:
        time.sleep(min(left, 0.5))


class _Buffer:
    """The worker's reusable read buffer."""

    data: bytearray | None = None


def transfer_one(
    spec: WorkerSpec, sender: Any, index: int, readout: datetime, buffer: _Buffer | None = None
) -> TransferRecord:
    """Read, (compress,) send one CCD; the record times every step with the wall clock."""
    from producers.compress import compress_fits

    exposure = spec.exposures[index]
    data_id = DataId(spec.instrument, exposure, spec.detector)
    start = datetime.now(UTC)
    cpu_start = time.process_time()
    raw_bytes = size = 0
    read_end = compressed = start
    try:
        buffer = buffer or _Buffer()
        buf = buffer.data = _read(spec.source, buffer.data)
        retarget_primary_header(buf, exposure_cards(exposure))
        raw_bytes = len(buf)
        read_end = datetime.now(UTC)
        data = compress_fits(buf, threads=spec.threads) if spec.compress else bytes(buf)
        size = len(data)
        compressed = datetime.now(UTC)
        result = sender.send(data_id, data, readout, compressed)
        status, error = result.status, ""
    except Exception as exc:  # one failed CCD must not stop the worker's later exposures
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    end = datetime.now(UTC)
    record = TransferRecord(
        data_id=data_id.key,
        worker=spec.index,
        detector=spec.detector,
        exposure=exposure,
        exposure_index=index,
        readout=readout,
        start=start,
        read_end=read_end,
        compressed=compressed,
        end=end,
        bytes=size,
        raw_bytes=raw_bytes,
        status=status,
        error=error,
        cpu_seconds=round(time.process_time() - cpu_start, 4),
    )
    logs.log_event(
        log,
        "transfer.done" if not error else "transfer.failed",
        logging.INFO if not error else logging.ERROR,
        run_id=spec.run_id,
        seconds=round(record.seconds, 4),
        send_seconds=round(record.send_seconds, 4),
        **record.to_json(),
    )
    return record


def worker_main(spec: WorkerSpec, ready: Any, start_times: Any, results: Any, stop: Any) -> None:
    """Process entry point: warm up, report ready, wait for the start, run every exposure."""
    with Path(spec.log_path).open("a", buffering=1) as log_file:
        logs.configure(stream=log_file)
        try:
            _run(spec, ready, start_times, results, stop)
        except Exception as exc:
            logs.log_event(
                log, "transfer.worker_failed", logging.ERROR, worker=spec.index, error=str(exc)
            )
            results.put({"worker_failed": spec.index, "error": f"{type(exc).__name__}: {exc}"})
            raise


def _run(spec: WorkerSpec, ready: Any, start_times: Any, results: Any, stop: Any) -> None:
    from producers.edge import warm_up
    from producers.sender import open_sender

    warm_up()
    sender = open_sender(
        spec.sender_url, spec.prefix, spec.quarantine_prefix, producer=f"bench-{spec.index}"
    )
    buffer = _Buffer()
    ready.put(spec.index)
    start = datetime.fromisoformat(start_times.get())
    for index in range(len(spec.exposures)):
        readout = start + timedelta(seconds=spec.interval * index)
        _sleep_until(readout)
        logs.log_event(
            log,
            "transfer.start",
            run_id=spec.run_id,
            data_id=DataId(spec.instrument, spec.exposures[index], spec.detector).key,
            worker=spec.index,
            readout=readout.isoformat(),
        )
        results.put(transfer_one(spec, sender, index, readout, buffer).to_json())
    # Stay alive until the parent has read our CPU time from /proc (see ``cpu``).
    stop.wait(timeout=600)
    close = getattr(sender, "close", None)
    if callable(close):
        close()
