"""The assembler's Prometheus export: CCD outcomes as they happen, and every few seconds the
consumer lag (records past the committed offsets), the open files and the held payload."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from functions.assembler.kafka_clients import committed_lag
from obsingest.logs import get_logger, log_event

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

log = get_logger("obsingest.assembler")

COMPONENT = "assembler"
#: seconds between refreshes of the lag / open files / memory gauges
GAUGE_SECONDS = 2.0


class AssemblerExporter:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._refreshed = 0.0

    def count(self, outcome: str, reason: str | None = None) -> None:
        self.metrics.ccd(COMPONENT, outcome, reason=reason)

    def refresh(self, service: Any) -> None:
        """The gauges, from the service's own state; never raises (metrics must not stop it)."""
        now = time.monotonic()
        if now - self._refreshed < GAUGE_SECONDS:
            return
        self._refreshed = now
        try:
            with service._lock:
                assigned, committed = sorted(service._assigned), dict(service._committed)
            self.metrics.assembler_state(
                committed_lag(service._consumer, assigned, committed),
                len(service.reassembler.open_files()),
                service.reassembler.memory_bytes,
                service.settings.memory_limit_bytes,
            )
        except Exception as exc:
            log_event(log, "assembler.metrics_failed", logging.WARNING, error=str(exc))
