"""The edge's counts, in one small object: what the health endpoint shows and what Prometheus
metrics (``obsingest/metrics.py``) will export, one counter or gauge per field, in one step."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class EdgeStats:
    #: new CCDs journalled (hand-off directory or API)
    accepted: int = 0
    #: pending CCDs found in the journal at start-up (resumed after a stop or crash)
    resumed: int = 0
    #: hand-offs of a CCD already known (journalled before)
    duplicates: int = 0
    #: new work refused (spool full, journal unwritable)
    refused: int = 0
    acked: int = 0
    #: acked CCDs by the destination's answer: stored | exists | conflict | acked (kafka)
    statuses: dict[str, int] = field(default_factory=dict)
    #: quarantined CCDs and files by reason
    quarantined: dict[str, int] = field(default_factory=dict)
    #: failed attempts that will be retried, by reason
    retries: dict[str, int] = field(default_factory=dict)
    worker_crashes: int = 0
    over_budget: int = 0
    raw_bytes: int = 0
    sent_bytes: int = 0
    #: gauges
    pending: int = 0
    in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: told of every change (``name``, ``key`` or None, amount): the Prometheus export
    listener: Callable[[str, str | None, int], None] | None = field(
        default=None, repr=False, compare=False
    )

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)
        if self.listener is not None:
            self.listener(name, None, amount)

    def count(self, name: str, key: str, amount: int = 1) -> None:
        with self._lock:
            table: dict[str, int] = getattr(self, name)
            table[key] = table.get(key, 0) + amount
        if self.listener is not None:
            self.listener(name, key, amount)

    def set(self, **gauges: int) -> None:
        with self._lock:
            for name, value in gauges.items():
                setattr(self, name, value)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                f.name: dict(v) if isinstance(v := getattr(self, f.name), dict) else v
                for f in fields(self)
                if not f.name.startswith("_") and f.name != "listener"
            }
