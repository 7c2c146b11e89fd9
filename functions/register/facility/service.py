"""The facility service: every ``every`` seconds a pass of canary, repair, reconcile, exposures
sweep, outbox drain and redrive, each guarded so one failing never stops the others. The canary's
verdict sets the reconcile window (back to the first unseen canary, or the last pass before a long
stop); the reconcile sweeps the full window every ``full_every`` and while widened, else incremental.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from functions.register.announce import ArrivalAnnouncer
from functions.register.exposures import ExposureCloser
from functions.register.facility.canary import CanaryState, CanaryWatch
from functions.register.facility.reconcile import Reconciler, ReconcileReport
from functions.register.facility.redrive import Redriver, RedriveReport
from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow
from obsingest.metrics import COMPONENT_COUNTS, Metrics, private_metrics
from obsingest.registry.ingested import CLOSED_INCOMPLETE, EMITTED

log = get_logger("obsingest.facility")

#: health codes (also the exit codes of ``obsingest reconcile`` and the service)
HEALTHY = 0
#: something could not be fixed this pass
DEGRADED = 1
NOTIFICATIONS_BROKEN = 2
COMPONENT = "reconcile"
SOURCE = "notifications"
#: status names of the counts kept in the catalogue's own series: (metric, labels)
CATALOGUE_COUNTS = {
    "registered_by_reconcile": ("obsingest_ccds_total", {"component": COMPONENT, "outcome": "registered"}),
    "objects_gone": ("obsingest_ccds_total", {"component": COMPONENT, "outcome": "missing_object"}),
    "canaries_written": ("obsingest_notification_canaries_total", {"event": "written"}),
    "redriven": ("obsingest_redrive_attempts_total", {"source": SOURCE, "result": "redriven"}),
    "parked": ("obsingest_redrive_attempts_total", {"source": SOURCE, "result": "failed"}),
}

#: how far before the first unseen canary the reconcile window starts after an outage
OUTAGE_MARGIN = timedelta(minutes=2)
#: how often a full sweep lists every night of the bucket, not only those its window can hold
EVERY_NIGHT_SECONDS = 86400.0


@dataclass
class PassReport:
    canary: CanaryState | None = None
    repaired: bool = False
    reconcile: ReconcileReport | None = None
    #: the exposures sweep: events written, exposures closed incomplete at their deadline
    ingested: int = 0
    incomplete: int = 0
    drained: int = 0
    redrive: RedriveReport | None = None
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        canary = self.canary
        return {
            "notifications_healthy": canary.healthy if canary else None,
            "broken_since": canary.broken_since.isoformat() if canary and canary.broken_since else None,
            "repaired": self.repaired,
            "reconcile": self.reconcile.as_dict() if self.reconcile else None,
            "exposures_ingested": self.ingested,
            "exposures_incomplete": self.incomplete,
            "drained": self.drained,
            "redrive": self.redrive.as_dict() if self.redrive else None,
            "errors": self.errors,
        }


@dataclass
class FacilityService:
    """Each stage is optional but the outbox drain (``announcer``)."""

    announcer: ArrivalAnnouncer
    reconciler: Reconciler | None = None
    canary: CanaryWatch | None = None
    redriver: Redriver | None = None
    #: the exposures sweep (None: no sweep)
    closer: ExposureCloser | None = None
    #: re-ensure topics, subscriptions and notification configs (None: not ours to repair)
    repair: Callable[[], Any] | None = None
    window: float = 6 * 3600.0
    every: float = 30.0
    full_every: float = 1800.0
    repair_every: float = 60.0
    drain_limit: int = 1000
    outbox_retention: timedelta = timedelta(days=7)
    clock: Callable[[], datetime] = utcnow
    metrics: Metrics = field(default_factory=private_metrics)
    #: gauges as of the last pass (``snapshot``)
    state: dict[str, float | int | None] = field(
        default_factory=lambda: {"notifications_healthy": 1, "last_pass_ok": 1}
    )
    #: after a stop longer than the window, the last pass before it (``_resume_point``)
    _resume_from: datetime | None = None
    _resume_known: bool = False
    _last_repair: float = float("-inf")
    _last_full: float = float("-inf")
    _last_every_night: float = float("-inf")
    #: the window's start of the last sweep that listed every night (the next one reaches back to it)
    _every_night_since: datetime | None = None
    _last_purge: float = float("-inf")
    _canary_seen: datetime | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.metrics.start(COMPONENT)
        if self.canary is not None:
            self.canary.metrics = self.metrics

    def _add(self, **counts: int) -> None:
        for name, n in counts.items():
            self.metrics.add(COMPONENT, name, n)

    def snapshot(self) -> dict[str, float | int | None]:
        """The counts and the gauges of the last pass, by name."""
        m = self.metrics
        out: dict[str, float | int | None] = {
            name: m.count(COMPONENT, name) for name in sorted(COMPONENT_COUNTS[COMPONENT])
        }
        for name, (metric, labels) in CATALOGUE_COUNTS.items():
            out[name] = int(m.value(metric, **labels))
        return out | self.state

    def health(self) -> int:
        """0 healthy, 1 degraded (the last pass failed), 2 notifications broken."""
        if not self.state["notifications_healthy"]:
            return NOTIFICATIONS_BROKEN
        return HEALTHY if self.state["last_pass_ok"] else DEGRADED

    def run_pass(self) -> PassReport:
        report = PassReport()
        now = self.clock()
        since = now - timedelta(seconds=self.window)
        if not self._resume_known:
            self._resume_point(report)
        if self._resume_from is not None:
            since = min(since, self._resume_from - OUTAGE_MARGIN)
        if self.canary is not None:
            report.canary = self._guard(report, "canary", self.canary.tick)
            if report.canary is not None:
                self._canary_stats(report.canary, now)
                if not report.canary.healthy:
                    report.repaired = self._repair(report, report.canary)
                    if report.canary.broken_since is not None:
                        since = min(since, report.canary.broken_since - OUTAGE_MARGIN)
        if self.reconciler is not None:
            report.reconcile = self._guard(report, "reconcile", self._reconcile, now, since)
            if (rec := report.reconcile) is not None:
                self._add(
                    objects_listed=rec.listed,
                    missing_found=rec.missing,
                    quarantined_by_reconcile=rec.outcomes.get("quarantined", 0),
                    reconcile_failures=rec.failed,
                )
                self.metrics.ccd(COMPONENT, "registered", n=rec.outcomes.get("registered", 0))
                self.metrics.ccd(COMPONENT, "missing_object", n=len(rec.gone))
        if self.closer is not None:
            closings = self._guard(report, "exposures", self.closer.sweep, since)
            if closings is not None:
                report.ingested = sum(1 for c in closings if c.outcome == EMITTED)
                report.incomplete = sum(1 for c in closings if c.outcome == CLOSED_INCOMPLETE and c.counted)
                self._add(exposures_ingested=report.ingested, exposures_incomplete=report.incomplete)
        report.drained = self._guard(report, "outbox", self._drain) or 0
        if self.redriver is not None:
            report.redrive = self._guard(report, "redrive", self.redriver.run_pass)
            if report.redrive is not None:
                self.metrics.redrive(SOURCE, "redriven", n=report.redrive.redriven)
                self.metrics.redrive(SOURCE, "failed", n=report.redrive.parked)
                self.metrics.dead_letters_waiting(SOURCE, report.redrive.waiting)
                self.state["dead_letters_waiting"] = report.redrive.waiting
        self._guard(report, "outbox-status", self._outbox_stats)
        ok = not report.errors and (report.reconcile is None or report.reconcile.consistent)
        if ok and self._resume_known:
            self._resume_from = None  # the stop is covered: back to the window
        self._add(passes=1, failed_passes=0 if ok else 1)
        self.state["last_pass_ok"] = int(ok)
        level = logging.INFO if ok and (report.canary is None or report.canary.healthy) else logging.WARNING
        log_event(log, "facility.pass", level, **report.as_dict())
        return report

    def _resume_point(self, report: PassReport) -> None:
        """Once: when did the facility last pass? After a stop longer than the window, objects
        of its first hours would escape every reconcile unseen by the canary (none was written)."""
        if self.canary is None:
            return
        last = self._guard(report, "resume", self.canary.audit.last_canary_written)
        if last is None and report.errors:
            return
        self._resume_known = True
        if last is not None and last < self.clock() - timedelta(seconds=self.window):
            self._resume_from = last
            log_event(
                log,
                "facility.resume",
                logging.WARNING,
                last_pass=last.isoformat(),
                note="stopped longer than the window: reaching back to the last pass",
            )

    def _guard(self, report: PassReport, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # one stage failing never stops the others or the loop
            report.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:500])
            log_event(log, "facility.stage_failed", logging.ERROR, stage=what, error=str(exc))
            return None

    def _canary_stats(self, state: CanaryState, now: datetime) -> None:
        if state.last_seen is not None and state.last_seen != self._canary_seen:
            self._canary_seen = state.last_seen
            self.metrics.canary("seen", at=state.last_seen.timestamp())
        self.state.update(
            notifications_healthy=int(state.healthy),
            canaries_overdue=state.overdue,
            canary_seen_age_seconds=state.seen_age(now),
        )
        if not state.healthy:
            log_event(
                log,
                "notifications.broken",
                logging.ERROR,
                since=state.broken_since.isoformat() if state.broken_since else None,
                last_seen=state.last_seen.isoformat() if state.last_seen else None,
            )

    def _repair(self, report: PassReport, state: CanaryState) -> bool:
        now = time.monotonic()
        if self.repair is None or now - self._last_repair < self.repair_every:
            return False
        self._last_repair = now
        try:
            self.repair()
        except Exception as exc:  # e.g. the emulator is still down: the next pass tries again
            report.errors.append(f"repair: {type(exc).__name__}: {exc}"[:500])
            log_event(log, "notifications.repair_failed", logging.ERROR, error=str(exc))
            return False
        self._add(repairs=1)
        log_event(
            log,
            "notifications.repaired",
            logging.WARNING,
            broken_since=state.broken_since.isoformat() if state.broken_since else None,
        )
        return True

    def _reconcile(self, now: datetime, since: datetime) -> ReconcileReport:
        """The full sweep when due or the window is widened, else the incremental pass."""
        assert self.reconciler is not None
        started = time.monotonic()
        widened = since < now - timedelta(seconds=self.window)
        full = widened or started - self._last_full >= self.full_every
        # an old night's CCD sent late may have lost its notification with all its siblings':
        # the first sweep, a widened one and one a day list every night (else those the window can hold)
        every_night = widened or started - self._last_every_night >= EVERY_NIGHT_SECONDS
        if not full:
            report = self.reconciler.run_new(since)
        elif every_night:
            report = self.reconciler.run(since, every_night=True, late_since=self._every_night_since)
            self._last_every_night, self._every_night_since = started, since
        else:
            report = self.reconciler.run(since, every_night=False)
        if full:
            self._last_full = started
        self._add(**{"full_sweeps" if full else "incremental_passes": 1})
        self.state["last_full_sweep_seconds" if full else "last_incremental_seconds"] = (
            time.monotonic() - started
        )
        return report

    def _drain(self) -> int:
        published = 0
        while published < self.drain_limit:
            result = self.announcer.drain(limit=min(100, self.drain_limit - published))
            published += result.published
            if result.failed or not result.published:
                break
        self._add(outbox_published=published)
        now = time.monotonic()
        if now - self._last_purge > 3600:
            self._last_purge = now
            self.announcer.registry.outbox.purge(self.outbox_retention)
        return published

    def _outbox_stats(self) -> None:
        status = self.announcer.registry.outbox.status(published=False)
        self.state.update(
            outbox_pending=status.pending, outbox_oldest_pending_seconds=status.oldest_pending_age
        )

    def run_forever(self) -> int:
        """Pass after pass until ``stop``; the health at the end."""
        while not self._stop.is_set():
            started = time.monotonic()
            self.run_pass()
            self._stop.wait(max(0.0, self.every - (time.monotonic() - started)))
        return self.health()

    def stop(self) -> None:
        self._stop.set()
