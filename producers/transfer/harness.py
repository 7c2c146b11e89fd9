"""Process orchestration of a harness run: cache, N warm workers, a common start, collection.

The parent prepares the CCD files, spawns one worker per CCD and waits until every one is warm,
so that process start-up never lands inside a figure; then it fixes the start time (default: a
few seconds from now) and every worker reads out on the same schedule. While they run, the parent
collects each transfer record, shows progress and, in end-to-end mode, the ArrivalEvents that the
facility side announces; the statistics themselves are in ``stats`` (pure).

End-to-end wiring (which store, registry, bus, assembler) belongs to the composition root (the
``obsingest bench transfer`` command): the harness only sees the small ``EndToEnd`` protocol.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

from obsingest import defaults
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent
from producers.transfer import cpu, stats
from producers.transfer.ccdcache import INSTRUMENT, ensure_ccd_files
from producers.transfer.plan import (
    Destination,
    compress_threads,
    exposure_ids,
    parse_destination,
    readout_times,
)
from producers.transfer.worker import WorkerSpec, worker_main

log = get_logger("obsingest.producer.transfer")

Progress = Callable[[str, bool], None]


class EndToEnd(Protocol):
    """The facility side of an end-to-end run: where to send, and the announcements."""

    sender_url: str
    prefix: str
    quarantine_prefix: str

    def start(self, on_arrival: Callable[[ArrivalEvent], None]) -> None: ...

    def announce_exposure(self, exposure: int, detectors: list[int], obs_start: datetime) -> None:
        """Publish the exposure's manifest before readout, as the camera would."""

    def processes(self) -> dict[str, list[int]]:
        """Facility services running as processes of their own (role -> pids), for the
        CPU-by-role report; this process is the rest of the facility side."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class HarnessConfig:
    destination: str
    ccds: int
    numexp: int
    interval: float
    compress: bool = False
    starttime: datetime | None = None
    ccd_size: str = "full"
    run_dir: Path = Path(".run/bench/transfer")
    threads: int | None = None
    lead_seconds: float = 3.0
    ready_timeout: float = 300.0
    arrival_timeout: float = 60.0
    budget: float = defaults.BUDGET_SECONDS


@dataclass
class HarnessResult:
    config: HarnessConfig
    run_id: str
    sender_url: str
    start: datetime
    exposures: list[int]
    records: list[stats.TransferRecord]
    arrivals: list[stats.Arrival] = field(default_factory=list)
    end_to_end: bool = False
    worker_errors: list[str] = field(default_factory=list)
    log_path: Path | None = None
    #: CPU seconds by role over the run window (see ``cpu.delta_seconds``)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    window_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The run as JSON: configuration, the table rows, stage breakdown and every record."""
        warm, rest = stats.split_warmup(self.records)
        warm_row = stats.transfer_row(self.config.ccds, warm)
        rest_row = stats.transfer_row(self.config.ccds, rest)
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "destination": self.config.destination,
            "sender_url": self.sender_url,
            "ccds": self.config.ccds,
            "numexp": self.config.numexp,
            "interval": self.config.interval,
            "compress": self.config.compress,
            "ccd_size": self.config.ccd_size,
            "end_to_end": self.end_to_end,
            "start": self.start.isoformat(),
            "exposures": self.exposures,
            "warmup": asdict(warm_row) if warm_row else None,
            "steady": asdict(rest_row) if rest_row else None,
            "failed": sum(not r.ok for r in self.records),
            "statuses": sorted({r.status for r in self.records}),
            "worker_errors": self.worker_errors,
            "log": str(self.log_path) if self.log_path else None,
            "cpu": self._cpu_json(),
        }
        if self.end_to_end:
            first = min(self.exposures)
            steady_arrivals = [a for a in self.arrivals if a.exposure != first]
            expected_steady = self.config.ccds * (self.config.numexp - 1)
            out["latency"] = {
                "all": asdict(stats.latency_summary(
                    self.arrivals, self.config.ccds * self.config.numexp, self.config.budget
                )),
                "steady": asdict(stats.latency_summary(
                    steady_arrivals, expected_steady, self.config.budget
                )),
            }  # fmt: skip
            out["stages"] = [asdict(r) for r in stats.stage_breakdown(steady_arrivals)]
            out["stages_warmup"] = [
                asdict(r)
                for r in stats.stage_breakdown([a for a in self.arrivals if a.exposure == first])
            ]
            out["arrivals"] = [a.to_json() for a in self.arrivals]
        out["records"] = [r.to_json() for r in self.records]
        return out

    def _cpu_json(self) -> dict[str, Any]:
        """CPU seconds per exposure by role, and per CCD for the edge workers."""
        n = max(1, self.config.numexp)
        edge = [r.cpu_seconds for r in self.records if r.ok]
        return {
            "cores": os.cpu_count(),
            "window_seconds": round(self.window_seconds, 2),
            "per_exposure": {k: round(v / n, 2) for k, v in self.cpu_seconds.items()},
            "edge_per_ccd_p50": round(stats.percentile(edge, 50), 3) if edge else None,
        }


def _arrival(event: ArrivalEvent, received: datetime) -> stats.Arrival:
    return stats.Arrival(
        exposure=event.exposure,
        detector=event.detector,
        readout=event.readout_time,
        compressed=event.compressed_time,
        stored=event.stored_time,
        registered=event.registered_time,
        published=event.published_time,
        received=received,
    )


class _Arrivals:
    """Thread-safe collection of the run's announcements (deduplicated on data id)."""

    def __init__(self, exposures: set[int]) -> None:
        self._exposures = exposures
        self._lock = threading.Lock()
        self.by_key: dict[tuple[int, int], stats.Arrival] = {}

    def __call__(self, event: ArrivalEvent) -> None:
        received = datetime.now(UTC)
        if event.exposure not in self._exposures:
            return
        with self._lock:
            self.by_key.setdefault((event.exposure, event.detector), _arrival(event, received))

    def count(self, exposure: int | None = None) -> int:
        with self._lock:
            return sum(exposure is None or k[0] == exposure for k in self.by_key)

    def all(self) -> list[stats.Arrival]:
        with self._lock:
            return sorted(self.by_key.values(), key=lambda a: (a.exposure, a.detector))


def _quiet(_text: str, _final: bool = False) -> None:
    """Progress sink that shows nothing."""


def run_harness(
    config: HarnessConfig,
    end_to_end: EndToEnd | None = None,
    progress: Progress | None = None,
    services: dict[str, list[int]] | None = None,
) -> HarnessResult:
    """Run the whole measurement; raises if workers cannot start or die before finishing.

    ``services``: role -> pids of the processes serving the run (emulators, broker, database),
    whose CPU time is reported next to the edge workers' and this process's (the facility side).
    """
    show = progress or _quiet
    if not 1 <= config.ccds <= 189:
        raise ValueError("--ccds must be 1..189 (LSSTCam science detectors)")
    if config.numexp < 1:
        raise ValueError("--numexp must be >= 1")
    dest: Destination = parse_destination(config.destination)
    run_dir = config.run_dir.resolve()
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    log_path = run_dir / "logs" / f"transfer-{run_id}.jsonl"
    detectors = list(range(config.ccds))

    def cache_progress(done: int, total: int) -> None:
        show(f"generating {config.ccd_size} CCD files in the cache: {done}/{total}", done == total)

    paths = ensure_ccd_files(run_dir / "cache", config.ccd_size, detectors, progress=cache_progress)
    sender_url, prefix, quarantine = dest.sender_url, dest.prefix, defaults.QUARANTINE_PREFIX
    if end_to_end is not None:
        sender_url, prefix = end_to_end.sender_url, end_to_end.prefix
        quarantine = end_to_end.quarantine_prefix
    threads = config.threads or compress_threads(config.ccds, os.cpu_count() or 1)
    # Workers get their exposure ids when spawned, before the start time is fixed: take them from
    # the clock now, which keeps them unique per run all the same.
    exposures = exposure_ids(config.starttime or datetime.now(UTC), config.numexp)
    specs = [
        WorkerSpec(
            index=i,
            instrument=INSTRUMENT,
            detector=det,
            source=str(paths[det][0] if config.compress else paths[det][1]),
            compress=config.compress,
            threads=threads,
            sender_url=sender_url,
            prefix=prefix,
            quarantine_prefix=quarantine,
            exposures=tuple(exposures),
            interval=config.interval,
            log_path=str(log_path),
            run_id=run_id,
        )
        for i, det in enumerate(detectors)
    ]
    arrivals = _Arrivals(set(exposures))
    ctx = get_context("spawn")
    ready, start_q, results, stop = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=worker_main, args=(s, ready, start_q, results, stop), daemon=True)
        for s in specs
    ]
    records: list[stats.TransferRecord] = []
    errors: list[str] = []
    finished = False
    try:
        if end_to_end is not None:
            end_to_end.start(arrivals)
        for p in procs:
            p.start()
        _wait_ready(procs, ready, config, show)
        start = config.starttime or datetime.now(UTC) + timedelta(seconds=config.lead_seconds)
        if start <= datetime.now(UTC):
            raise ValueError(f"start time {start.isoformat()} is already past")
        log_event(log, "transfer.run.start", run_id=run_id, start=start.isoformat(),
                  ccds=config.ccds, numexp=config.numexp, interval=config.interval,
                  compress=config.compress, sender_url=sender_url)  # fmt: skip
        roles = {
            "edge_workers": [p.pid for p in procs if p.pid],
            # before facility_process: a pid counts under the first role whose tree has it
            **(end_to_end.processes() if end_to_end is not None else {}),
            "facility_process": [os.getpid()],
            **(services or {}),
        }
        cpu_before = cpu.sample(roles)
        window_start = time.monotonic()
        for _ in procs:
            start_q.put(start.isoformat())
        readouts = readout_times(start, config.interval, config.numexp)
        _collect(procs, results, records, errors, exposures, readouts, config, end_to_end,
                 arrivals, show)  # fmt: skip
        if end_to_end is not None:
            _wait_arrivals(arrivals, records, config, show)
        cpu_used = cpu.delta_seconds(cpu_before, cpu.sample(roles))
        window = time.monotonic() - window_start
        finished = True
    finally:
        stop.set()
        for p in procs:
            # After a failure workers may still wait for a start time that never comes.
            p.join(timeout=30 if finished else 0)
            if p.is_alive():
                p.terminate()
                p.join()
        if end_to_end is not None:
            end_to_end.close()
    records.sort(key=lambda r: (r.exposure_index, r.detector))
    result = HarnessResult(
        config=config,
        run_id=run_id,
        sender_url=sender_url,
        start=start,
        exposures=exposures,
        records=records,
        arrivals=arrivals.all(),
        end_to_end=end_to_end is not None,
        worker_errors=errors,
        log_path=log_path,
        cpu_seconds=cpu_used,
        window_seconds=window,
    )
    log_event(log, "transfer.run.done", run_id=run_id, transfers=len(records),
              failed=sum(not r.ok for r in records), announced=len(result.arrivals))  # fmt: skip
    return result


def _wait_ready(procs: list[Any], ready: Any, config: HarnessConfig, show: Progress) -> None:
    deadline = time.monotonic() + config.ready_timeout
    warm = 0
    while warm < len(procs):
        show(f"starting {len(procs)} workers: {warm}/{len(procs)} warm", False)
        try:
            ready.get(timeout=0.5)
        except queue.Empty:
            dead = sum(not p.is_alive() for p in procs)
            if dead:
                raise RuntimeError(
                    f"{dead} worker(s) died while warming up (see the log)"
                ) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers not warm after {config.ready_timeout} s") from None
        else:
            warm += 1
    show(f"starting {len(procs)} workers: all warm", True)


def _collect(
    procs: list[Any],
    results: Any,
    records: list[stats.TransferRecord],
    errors: list[str],
    exposures: list[int],
    readouts: list[datetime],
    config: HarnessConfig,
    end_to_end: EndToEnd | None,
    arrivals: _Arrivals,
    show: Progress,
) -> None:
    """Gather every worker's records, announcing each exposure at its readout; show progress."""
    expected = len(procs) * len(exposures)
    announced = 0
    complete: set[int] = set()
    deadline = readouts[-1] + timedelta(seconds=120 + 5 * config.ccds)
    while len(records) < expected:
        now = datetime.now(UTC)
        while (
            end_to_end is not None
            and announced < len(exposures)
            and (readouts[announced] - timedelta(seconds=1) <= now)
        ):
            end_to_end.announce_exposure(exposures[announced], list(range(config.ccds)),
                                         readouts[announced] - timedelta(seconds=15))  # fmt: skip
            announced += 1
        try:
            item = results.get(timeout=0.2)
        except queue.Empty:
            item = None
        if item is None:
            if now > deadline:
                raise TimeoutError(f"only {len(records)}/{expected} transfers by {deadline}")
            if not any(p.is_alive() for p in procs) and results.empty():
                raise RuntimeError(f"workers exited after {len(records)}/{expected} transfers")
        else:
            if "worker_failed" in item:
                errors.append(f"worker {item['worker_failed']}: {item['error']}")
                raise RuntimeError(f"worker {item['worker_failed']} failed: {item['error']}")
            record = stats.TransferRecord.from_json(item)
            records.append(record)
            index = record.exposure_index
            if sum(r.exposure_index == index for r in records) == config.ccds:
                complete.add(index)
                _show_progress(records, exposures, config, end_to_end is not None, arrivals,
                               show, index, final=True)  # fmt: skip
                continue
        current = max((r.exposure_index for r in records), default=0)
        if current not in complete:
            _show_progress(records, exposures, config, end_to_end is not None, arrivals, show,
                           current)  # fmt: skip


def _show_progress(
    records: list[stats.TransferRecord],
    exposures: list[int],
    config: HarnessConfig,
    e2e: bool,
    arrivals: _Arrivals,
    show: Progress,
    current: int,
    final: bool = False,
) -> None:
    """One line per exposure: rewritten while it runs, kept when all its CCDs are sent."""
    sent = [r for r in records if r.ok]
    this = [r for r in sent if r.exposure_index == current]
    text = (
        f"exposure {current + 1}/{len(exposures)}: sent {len(this)}/{config.ccds}"
        f" (all: {len(sent)}/{config.ccds * len(exposures)}"
        f", failed {len(records) - len(sent)})"
    )
    if e2e:
        text += f", announced {arrivals.count()}"
    if this:
        text += f", max {max(r.seconds for r in this):.2f} s"
    show(text, final)


def _wait_arrivals(
    arrivals: _Arrivals, records: list[stats.TransferRecord], config: HarnessConfig,
    show: Progress,
) -> None:  # fmt: skip
    """Wait until every CCD that was sent is announced (or the timeout); show the count."""
    expected = sum(r.ok for r in records)
    deadline = time.monotonic() + config.arrival_timeout
    while arrivals.count() < expected and time.monotonic() < deadline:
        show(f"waiting for announcements: {arrivals.count()}/{expected}", False)
        time.sleep(0.1)
    show(f"announced: {arrivals.count()}/{expected}", True)
