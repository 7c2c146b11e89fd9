"""What the facility service counts: a small stats object a metrics exporter can read later
(``snapshot()``: plain numbers, gauges and counters), and ``health()``: 0 when notifications
flow and nothing is stuck, else the non-zero code the process exits with."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

#: health codes (also the exit codes of ``obsingest reconcile`` and the service)
HEALTHY = 0
#: something could not be fixed this pass (registration failed, objects gone, outbox stuck)
DEGRADED = 1
#: notifications have stopped (the canary did not come back)
NOTIFICATIONS_BROKEN = 2


@dataclass
class FacilityStats:
    # counters (since start)
    passes: int = 0
    failed_passes: int = 0
    objects_listed: int = 0
    missing_found: int = 0
    registered_by_reconcile: int = 0
    quarantined_by_reconcile: int = 0
    reconcile_failures: int = 0
    objects_gone: int = 0
    canaries_written: int = 0
    canary_write_failures: int = 0
    repairs: int = 0
    outbox_published: int = 0
    redriven: int = 0
    parked: int = 0
    exposures_ingested: int = 0  # ExposureIngested written by the sweep (a lost check)
    exposures_incomplete: int = 0  # exposures counted incomplete at their deadline
    full_sweeps: int = 0  # reconcile passes over the whole window
    incremental_passes: int = 0  # reconcile passes from the watermarks
    # gauges (as of the last pass)
    notifications_healthy: int = 1
    canaries_overdue: int = 0
    canary_seen_age_seconds: float | None = None
    outbox_pending: int = 0
    outbox_oldest_pending_seconds: float | None = None
    dead_letters_waiting: int = 0
    last_pass_ok: int = 1
    last_full_sweep_seconds: float | None = None
    last_incremental_seconds: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def set(self, **values: float | int | None) -> None:
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)

    def snapshot(self) -> dict[str, float | int | None]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}

    def health(self) -> int:
        with self._lock:
            if not self.notifications_healthy:
                return NOTIFICATIONS_BROKEN
            return HEALTHY if self.last_pass_ok else DEGRADED
