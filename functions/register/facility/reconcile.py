"""Reconcile the bucket with the registry: register what a lost notification missed (through
``RegisterService``), report rows whose object is gone. ``run`` sweeps the full window (every
night, or only the nights it can hold: the service's routine sweeps); ``run_new`` lists each
instrument prefix (``listing.lanes``) from its own watermark, so its cost follows what is new.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from functions.register.facility import listing
from functions.register.facility.listing import lane_of, list_nights, list_objects, nights_in
from functions.register.facility.watermark import PrefixTail
from functions.register.service import RegisterService
from obsingest.errors import ObjectMissing, ObsIngestError, RetriableError
from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow
from obsingest.store.base import StoredObject
from obsingest.store.notifications import GCS_NOTIFICATION_FINALIZE, ObjectEvent

log = get_logger("obsingest.reconcile")


@dataclass
class ReconcileReport:
    since: datetime
    until: datetime
    listed: int = 0
    known: int = 0
    missing: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # registered, quarantined, ...
    failed: int = 0  # retriable errors: tried again next pass
    gone: list[str] = field(default_factory=list)
    dry_run: bool = False
    mode: str = "full"
    #: lane (instrument prefix, ``listing.lanes``) -> the name its next incremental pass lists from
    watermarks: dict[str, str] = field(default_factory=dict)

    @property
    def consistent(self) -> bool:
        """Nothing missing is left unhandled and nothing is gone."""
        return self.failed == 0 and not self.gone and (not self.dry_run or self.missing == 0)

    def as_dict(self) -> dict[str, Any]:
        times = {"since": self.since.isoformat(), "until": self.until.isoformat()}
        return asdict(self) | times | {"outcomes": dict(self.outcomes)}


@dataclass
class Reconciler:
    service: RegisterService
    prefixes: tuple[str, ...]
    grace: float = 15.0
    clock: Callable[[], datetime] = utcnow
    #: the watermarks' ``lag`` and ``hold`` (seconds, ``PrefixTail``)
    lag: float = 120.0
    hold: float = 1800.0
    #: one per lane (``listing.lanes``: an instrument prefix), found again by every pass
    tails: dict[str, PrefixTail] = field(default_factory=dict)
    #: names of the objects lying directly at a prefix's levels (outside the layout) now settled
    loose: set[str] = field(default_factory=set)

    def _tail(self, lane: str) -> PrefixTail:
        if lane not in self.tails:
            # an object younger than the grace is not checked yet: it must hold the watermark
            hold = max(self.hold, self.grace + self.lag)
            self.tails[lane] = PrefixTail(lane, lag=self.lag, hold=hold)
        return self.tails[lane]

    def run(
        self,
        since: datetime,
        until: datetime | None = None,
        dry_run: bool = False,
        every_night: bool = True,
        late_since: datetime | None = None,
    ) -> ReconcileReport:
        """The full sweep of [since, min(until, now - grace)): register what is missing, report
        what is gone, re-seed the watermarks. Lists every night, or only those the window can hold
        (``nights``) unless ``every_night``; keeps only the window's objects (and the watermark's),
        and, listing every night, those created since ``late_since`` in the nights a routine sweep
        skips (an old night's CCD sent late: only such a sweep lists it)."""
        now = self.clock()
        latest = now - timedelta(seconds=self.grace)
        until = min(until, latest) if until else latest
        report = ReconcileReport(since=since, until=until, dry_run=dry_run)
        store = self.service.store
        base = store.uri("")
        rows = self.service.registry.audit.stored_between(since, until, uri_prefix=base)
        stored = {uri[len(base) :] for uri in (row["uri"] for row in rows)}
        wanted, routine = nights(since, stored, every_night), nights(since, stored)
        late: list[StoredObject] = []
        # what the watermarks look at: the young (``lag``) and the unsettled (never before since)
        kept_from = min(since, now - timedelta(seconds=self.lag))
        kept: dict[str, list[StoredObject]] = {}  # per lane
        last: dict[str, StoredObject] = {}
        loose: list[StoredObject] = []
        for prefix in self.prefixes:
            kept.update((found, []) for found in listing.lanes(store, prefix)[1])  # idle lanes too
            for obj in list_nights(store, prefix, wanted):
                if late_since is not None and late_since <= obj.time_created < since:
                    found = nights_in(obj.name)
                    if found and not routine(found[0]):
                        late.append(obj)
                lane = lane_of(prefix, obj.name)
                if lane is None:
                    loose.append(obj)
                    continue
                objs = kept.setdefault(lane, [])
                if obj.time_created >= kept_from:
                    objs.append(obj)
                if lane not in last or obj.name > last[lane].name:
                    last[lane] = obj
        for lane, obj in last.items():
            if obj not in kept[lane]:
                kept[lane].append(obj)  # the watermark's fallback: the last name listed
        window = late + [
            obj
            for obj in (*loose, *(o for objs in kept.values() for o in objs))
            if since <= obj.time_created < until
        ]
        listed = {store.uri(obj.name): obj for obj in window}
        report.listed = len(listed)
        settled = self._settle(listed, report, dry_run)
        report.gone = self._gone(rows, listed)
        if not dry_run:
            # an idle lane (nothing in the nights listed) starts at the window's first night: the
            # incremental passes list what comes, not the lane's past
            floor = "" if every_night else f"{since - timedelta(days=1):%Y%m%d}/"
            self.tails = {}
            for lane, objs in kept.items():
                tail = self._tail(lane)
                tail.start = "" if objs else f"{lane}{floor}"
                report.watermarks[lane] = tail.advance(objs, settled, now, since)
            self.loose = settled & {obj.name for obj in loose}
        self._log(report)
        return report

    def run_new(self, since: datetime) -> ReconcileReport:
        """The incremental pass: each lane (instrument prefix) from its own watermark, and the
        objects lying outside them, register what is not settled yet. The lanes are found again
        every pass (a delimiter listing per level: ``raw/``, ``quarantine/``, ``quarantine/raw/``),
        so a new instrument's first CCD is seen by the next pass."""
        now = self.clock()
        until = now - timedelta(seconds=self.grace)
        report = ReconcileReport(since=since, until=until, mode="incremental")
        store = self.service.store
        loose: list[StoredObject] = []
        found: list[str] = []
        for prefix in self.prefixes:
            objects, lanes = listing.lanes(store, prefix)
            loose += objects
            found += lanes
        self.tails = {lane: tail for lane, tail in self.tails.items() if lane in found}
        for lane in found:
            tail = self._tail(lane)
            objs = list_objects(store, lane, start_offset=tail.start)
            report.listed += len(objs)
            fresh = {store.uri(obj.name): obj for obj in tail.unchecked(objs, since, until)}
            settled = self._settle(fresh, report)
            report.watermarks[lane] = tail.advance(objs, settled, now, since)
        report.listed += len(loose)
        names = {obj.name for obj in loose}
        fresh = {
            store.uri(obj.name): obj
            for obj in loose
            if obj.name not in self.loose and since <= obj.time_created < until
        }
        self.loose = (self.loose | self._settle(fresh, report)) & names
        self._log(report)
        return report

    def _settle(
        self, listed: dict[str, StoredObject], report: ReconcileReport, dry_run: bool = False
    ) -> set[str]:
        """Register what the registry lacks of ``listed`` (uri -> object); the names it now knows."""
        audit = self.service.registry.audit
        known = audit.registered_uris(listed) | audit.quarantined_uris(listed)
        report.known += len(known & listed.keys())
        settled = {listed[uri].name for uri in known & listed.keys()}
        for uri, obj in sorted(listed.items()):
            if uri in known:
                continue
            report.missing += 1
            if dry_run:
                log_event(log, "reconcile.missing", logging.WARNING, object=obj.name)
            elif self._register(obj, report):
                settled.add(obj.name)
        return settled

    def _log(self, report: ReconcileReport) -> None:
        level = logging.WARNING if (report.missing or report.gone or report.failed) else logging.INFO
        log_event(log, "reconcile.pass", level, **report.as_dict())

    def _register(self, obj: StoredObject, report: ReconcileReport) -> bool:
        """Hand ``obj`` to the register service; False on a retriable failure."""
        event = ObjectEvent(f"reconcile:{obj.generation}", GCS_NOTIFICATION_FINALIZE, obj)
        try:
            outcome = self.service.handle(event)
        except RetriableError as exc:
            report.failed += 1
            log_event(
                log,
                "reconcile.register_failed",
                logging.WARNING,
                object=obj.name,
                reason=exc.reason,
                error=str(exc),
            )
            return False
        report.outcomes[outcome.status] += 1
        log_event(
            log,
            "reconcile.registered_missing",
            logging.WARNING,
            object=obj.name,
            status=outcome.status,
            reason=outcome.reason or None,
        )
        return True

    def _gone(self, rows: list[dict[str, Any]], listed: dict[str, StoredObject]) -> list[str]:
        """Registered objects of the window (``rows``) the bucket no longer has (each stat-ed: the
        row's and the listing's times could straddle the window's edge)."""
        store = self.service.store
        base = store.uri("")
        gone = []
        for row in rows:
            uri = row["uri"]
            if uri in listed:
                continue
            try:
                store.stat(uri[len(base) :])
            except ObjectMissing:
                gone.append(uri)
                log_event(log, "reconcile.object_gone", logging.ERROR, uri=uri, dataset_id=str(row["id"]))
            except ObsIngestError as exc:  # cannot tell now: not reported as gone
                log_event(log, "reconcile.stat_failed", logging.WARNING, uri=uri, error=str(exc))
        return gone


def nights(since: datetime, stored: set[str], every_night: bool = False) -> Callable[[int], bool]:
    """Which nights (day_obs) a sweep of the window from ``since`` lists. An object created in the
    window was observed in it (day_obs >= the UTC date of ``since`` less a day: day_obs is the
    date at UTC-12h), every later night included; or sent late, an earlier night's: its
    notification's siblings are registered in the window (``stored``: their nights are listed),
    unless notifications were down (the window is widened) or it came before the facility's
    start: those sweeps, the first one and ``obsingest reconcile`` by hand, list ``every_night``."""
    first = int((since - timedelta(days=1)).strftime("%Y%m%d"))
    late = {night for name in stored for night in nights_in(name)}
    return lambda night: every_night or night >= first or night in late
