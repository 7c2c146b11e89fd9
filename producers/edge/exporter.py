"""The edge's Prometheus export beyond its counts: per-CCD stage times from each worker's
``Outcome`` and spool gauges refreshed by the engine. Workers never touch prometheus_client
(parent-side aggregation, ``obsingest/metrics.py``), so a worker killed by a signal leaves no
stale per-process files.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from obsingest.logs import get_logger

if TYPE_CHECKING:
    from obsingest.metrics import Metrics
    from producers.edge.ccd import Outcome

log = get_logger("obsingest.edge")

COMPONENT = "edge"
#: seconds between refreshes of the spool gauges (a journal count query each)
REFRESH_SECONDS = 5.0


class EdgeExporter:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._refreshed = 0.0
        metrics.start(COMPONENT)

    def exhausted(self, reason: str) -> None:
        """A failed attempt because a resource ran out (``destination-full``, ...)."""
        self.metrics.exhausted(COMPONENT, reason)

    def outcome(self, outcome: Outcome) -> None:
        """One acknowledged CCD: its compress and send stage times."""
        if outcome.compress_seconds or outcome.read_seconds:
            self.metrics.ccd(COMPONENT, "compressed")
            self.metrics.edge_stage("compress", outcome.read_seconds + outcome.compress_seconds)
        self.metrics.ccd(COMPONENT, "sent")
        self.metrics.edge_stage("send", outcome.send_seconds)

    def refresh(self, service: Any, force: bool = False) -> None:
        """Spool gauges: CCDs by journal state, age of the oldest unacknowledged one, free
        bytes, refusal."""
        now = time.monotonic()
        if not force and now - self._refreshed < REFRESH_SECONDS:
            return
        self._refreshed = now
        journal = service.journal
        if journal is None:
            return
        try:
            depths = journal.counts()
            oldest = journal.oldest_unacknowledged_readout()
            free = service.refusal.free_bytes()
        except Exception as exc:  # a full or broken spool must not stop the engine
            log.warning("edge.metrics_refresh_failed", extra={"error": str(exc)})
            return
        age = max(0.0, time.time() - oldest) if oldest is not None else 0.0
        refusing = service.refusal.reason.split(":", 1)[0] if service.refusal.refusing else None
        self.metrics.edge_spool(depths, age, free, refusing)
