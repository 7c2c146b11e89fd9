"""The facility service's Prometheus export: after every pass, what ``FacilityStats`` counted
since the last one becomes catalogue counters (CCDs registered by reconcile, objects gone,
canaries written and seen, dead letters redriven or parked) and its gauges are set (dead
letters waiting, the canary's last sighting, from which the catalogue derives its age)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from functions.register.facility.stats import FacilityStats

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

COMPONENT = "reconcile"
SOURCE = "notifications"


class FacilityExporter:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._last: dict[str, int] = {}
        self._seen: datetime | None = None
        metrics.start(COMPONENT)

    def _delta(self, snap: dict[str, float | int | None], name: str) -> int:
        value = int(snap.get(name) or 0)
        delta = value - self._last.get(name, 0)
        self._last[name] = value
        return max(delta, 0)

    def sync(self, stats: FacilityStats, canary_last_seen: datetime | None) -> None:
        m = self.metrics
        snap = stats.snapshot()
        if n := self._delta(snap, "registered_by_reconcile"):
            m.ccd(COMPONENT, "registered", n=n)
        if n := self._delta(snap, "objects_gone"):
            m.ccd(COMPONENT, "missing_object", n=n)
        for _ in range(self._delta(snap, "canaries_written")):
            m.canary("written")
        if canary_last_seen is not None and canary_last_seen != self._seen:
            self._seen = canary_last_seen
            m.canary("seen", at=canary_last_seen.timestamp())
        if n := self._delta(snap, "redriven"):
            m.redrive(SOURCE, "redriven", n=n)
        if n := self._delta(snap, "parked"):
            m.redrive(SOURCE, "failed", n=n)
        m.dead_letters_waiting(SOURCE, int(snap.get("dead_letters_waiting") or 0))
