"""Closing exposures: ``close`` runs the registry's exactly-once check and publishes its
ExposureIngested; ``sweep`` also closes overdue ones incomplete. Concurrent callers of
``close_quietly`` share checks: a burst costs two or three checks, not one per CCD.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from functions.register.announce import ArrivalAnnouncer
from obsingest import defaults
from obsingest.errors import ObsIngestError
from obsingest.logs import get_logger, log_event
from obsingest.registry.ingested import CLOSED_INCOMPLETE, EMITTED, Closing, IngestedCheck

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

log = get_logger("obsingest.register.exposures")


@dataclass
class ExposureCloser:
    check: IngestedCheck
    announcer: ArrivalAnnouncer
    metrics: Metrics | None = None
    #: seconds after shutter close (obs_start + exposure time) when an exposure is overdue
    allowance: float = defaults.BUDGET_SECONDS + defaults.EXPOSURE_DEADLINE_GRACE_SECONDS
    _flights: dict[tuple[str, int], _Flight] = field(default_factory=dict, init=False, repr=False)
    _landed: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    def close(self, instrument: str, exposure: int, published: Sequence[int] = ()) -> Closing:
        """Check one exposure now (``published``: outbox rows to mark published); raises
        ``RetriableError`` when the registry cannot answer."""
        closing = self.check.check(instrument, exposure, published)
        self._done(closing)
        return closing

    def close_quietly(self, instrument: str, exposure: int, published: Sequence[int] = ()) -> Closing | None:
        """``close`` shared with concurrent callers: returns once a check started after this call
        has finished (its closing; None if it failed, logged: the sweep asks again)."""
        key = (instrument, exposure)
        with self._landed:
            flight = self._flights.setdefault(key, _Flight())
            flight.asked += 1
            mine = flight.asked
            flight.callers += 1
            flight.marks.extend(published)
            while flight.running and flight.covered < mine:
                self._landed.wait()
            if flight.covered >= mine:  # a check that started after this call has finished
                self._leave(key, flight)
                return flight.result
            flight.running = True
            covers = flight.asked
            marks, flight.marks = flight.marks, []  # those of every caller this check covers
        result: Closing | None = None
        try:
            result = self.close(instrument, exposure, marks)
        except ObsIngestError as exc:
            if marks:  # not marked with the check: on their own (a failure is logged)
                self.announcer.mark(marks)
            log_event(
                log,
                "exposure.check_deferred",
                logging.WARNING,
                instrument=instrument,
                exposure=exposure,
                reason=exc.reason,
                error=str(exc),
            )
        finally:
            with self._landed:
                flight.running = False
                if result is not None:
                    flight.covered, flight.result = covers, result
                self._leave(key, flight)
                self._landed.notify_all()
        return result

    def _leave(self, key: tuple[str, int], flight: _Flight) -> None:
        """(lock held) The last caller through forgets the exposure."""
        flight.callers -= 1
        if not flight.callers and self._flights.get(key) is flight:
            del self._flights[key]

    def sweep(self, since: datetime) -> list[Closing]:
        """Emit the complete exposures of manifests since ``since`` nobody announced, close
        the overdue ones incomplete."""
        closings = self.check.sweep(since, self.allowance)
        for closing in closings:
            self._done(closing)
        return closings

    def _done(self, closing: Closing) -> None:
        if closing.outcome == EMITTED and closing.message is not None:
            self.announcer.publish_message(closing.row_id, closing.message, closing.event)
        if closing.counted and self.metrics is not None:
            self.metrics.exposure_completed(
                closing.instrument, closing.status, closing.max_latency, closing.missing
            )
        about: dict[str, Any] = {"instrument": closing.instrument, "exposure": closing.exposure}
        presence = closing.presence
        if closing.outcome == EMITTED:
            log_event(
                log,
                "exposure.ingested",
                **about,
                status=closing.status,
                expected=presence.expected if presence else None,
                latency_max_s=presence.latency_max if presence else None,
                counted=closing.counted,
            )
        elif closing.outcome == CLOSED_INCOMPLETE and closing.counted:
            missing = list(presence.missing) if presence else None
            log_event(log, "exposure.incomplete_at_deadline", logging.WARNING, **about, missing=missing)


@dataclass
class _Flight:
    """The shared checks of one exposure (``ExposureCloser.close_quietly``)."""

    #: callers so far, numbered in the order they asked
    asked: int = 0
    #: callers numbered up to this are covered by a finished check
    covered: int = 0
    #: callers inside ``close_quietly`` now
    callers: int = 0
    running: bool = False
    result: Closing | None = None
    #: outbox rows published by callers not yet covered by a check, for it to mark
    marks: list[int] = field(default_factory=list)
