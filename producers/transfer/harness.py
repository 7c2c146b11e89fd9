"""A harness run's configuration, result and announcements (the run itself: ``drive``). End-to-end
wiring belongs to ``obsingest bench transfer``: the harness only sees ``EndToEnd``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from obsingest import defaults
from obsingest.logs import get_logger
from obsingest.messages import ArrivalEvent
from obsingest.registry.completeness import percentile
from producers.transfer import stats

log = get_logger("obsingest.producer.transfer")


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
    #: edge worker processes (default: ``plan.edge_workers``)
    workers: int | None = None
    lead_seconds: float = 3.0
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
    workers: int = 0
    threads: int = 0
    #: seconds the DAQ's writes of every exposure's files took, before the start
    staging_seconds: float = 0.0
    #: per exposure: CPU by role while it was in flight (busy) and after (idle)
    cpu_phases: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The run as JSON: configuration, the table rows, stage breakdown and every record."""
        warm, rest = stats.split_warmup(self.records)
        warm_row = stats.transfer_row(self.config.ccds, warm)
        rest_row = stats.transfer_row(self.config.ccds, rest)
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "destination": self.config.destination,
            "sender_url": self.sender_url,
            **{k: getattr(self.config, k) for k in ("ccds", "numexp", "interval", "compress", "ccd_size")},
            "workers": self.workers,
            "threads": self.threads,
            "staging_seconds": round(self.staging_seconds, 2),
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
            c, first = self.config, min(self.exposures)
            warmup = [a for a in self.arrivals if a.exposure == first]
            steady = [a for a in self.arrivals if a.exposure != first]
            out["latency"] = {
                "all": asdict(stats.latency_summary(self.arrivals, c.ccds * c.numexp, c.budget)),
                "steady": asdict(stats.latency_summary(steady, c.ccds * (c.numexp - 1), c.budget)),
            }
            out["stages"] = [asdict(r) for r in stats.stage_breakdown(steady)]
            out["stages_warmup"] = [asdict(r) for r in stats.stage_breakdown(warmup)]
            out["arrivals"] = [a.to_json() for a in self.arrivals]
        out["records"] = [r.to_json() for r in self.records]
        return out

    def _cpu_json(self) -> dict[str, Any]:
        """CPU seconds per exposure by role, and per CCD for the edge workers."""
        n = max(1, self.config.numexp)
        done = [r for r in self.records if r.ok]

        def p50(values: list[float]) -> float | None:
            return round(percentile(values, 50), 4) if values else None

        return {
            "cores": os.cpu_count(),
            "window_seconds": round(self.window_seconds, 2),
            "per_exposure": {k: round(v / n, 2) for k, v in self.cpu_seconds.items()},
            "edge_per_ccd_p50": p50([r.cpu_seconds for r in done]),
            "edge_compress_per_ccd_p50": p50([r.compress_cpu_seconds for r in done]),
            "edge_send_per_ccd_p50": p50([r.send_cpu_seconds for r in done]),
            "phases": self.cpu_phases,
        }


class Arrivals:
    """Thread-safe collection of the run's announcements (deduplicated on data id)."""

    def __init__(self, exposures: set[int]) -> None:
        self._exposures = exposures
        self._lock = threading.Lock()
        self.by_key: dict[tuple[int, int], stats.Arrival] = {}

    def __call__(self, event: ArrivalEvent) -> None:
        received = datetime.now(UTC)
        if event.exposure not in self._exposures:
            return
        stages = ("readout", "compressed", "stored", "registered", "published")
        times = {stage: getattr(event, f"{stage}_time") for stage in stages}
        arrival = stats.Arrival(exposure=event.exposure, detector=event.detector, received=received, **times)
        with self._lock:
            self.by_key.setdefault((event.exposure, event.detector), arrival)

    def count(self, exposure: int | None = None) -> int:
        with self._lock:
            return sum(exposure is None or k[0] == exposure for k in self.by_key)

    def all(self) -> list[stats.Arrival]:
        with self._lock:
            return sorted(self.by_key.values(), key=lambda a: (a.exposure, a.detector))
