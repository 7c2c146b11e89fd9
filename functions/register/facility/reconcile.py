"""Reconcile the bucket with the registry: register what a lost notification missed, report what
the registry holds but the bucket no longer does.

One pass lists the objects under the configured prefixes created in a window (and at least
``grace`` seconds ago: younger ones are still on their way through their notification), asks
the registry which of them it knows (a datastore record or a quarantine record names the
object), and hands every other one to the very ``RegisterService`` the function runs, as the
finalize event it missed. Registration is idempotent, so racing a late notification changes
nothing; a bad object is quarantined with its reason, as it would have been.

Rows whose object was stored in the window but is no longer in the bucket are reported (log,
count, list): the pipeline never deletes, so it is for a human to look at.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from functions.register.facility.listing import list_objects
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

    @property
    def consistent(self) -> bool:
        """Nothing missing is left unhandled and nothing is gone."""
        return self.failed == 0 and not self.gone and (not self.dry_run or self.missing == 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "listed": self.listed,
            "known": self.known,
            "missing": self.missing,
            "outcomes": dict(self.outcomes),
            "failed": self.failed,
            "gone": list(self.gone),
            "dry_run": self.dry_run,
        }


@dataclass
class Reconciler:
    service: RegisterService
    prefixes: tuple[str, ...]
    grace: float = 15.0
    clock: Callable[[], datetime] = utcnow

    def run(
        self, since: datetime, until: datetime | None = None, dry_run: bool = False
    ) -> ReconcileReport:
        """Compare objects created in [since, min(until, now - grace)) with the registry."""
        now = self.clock()
        latest = now - timedelta(seconds=self.grace)
        until = min(until, latest) if until else latest
        report = ReconcileReport(since=since, until=until, dry_run=dry_run)
        store = self.service.store
        listed: dict[str, StoredObject] = {}
        for prefix in self.prefixes:
            for obj in list_objects(store, prefix, since, until):
                listed[store.uri(obj.name)] = obj
        report.listed = len(listed)
        audit = self.service.registry.audit
        known = audit.registered_uris(listed) | audit.quarantined_uris(listed)
        report.known = len(known & listed.keys())
        missing = [obj for uri, obj in sorted(listed.items()) if uri not in known]
        report.missing = len(missing)
        for obj in missing:
            if dry_run:
                log_event(log, "reconcile.missing", logging.WARNING, object=obj.name)
                continue
            self._register(obj, report)
        report.gone = self._gone(since, until, listed)
        level = (
            logging.WARNING if (report.missing or report.gone or report.failed) else logging.INFO
        )
        log_event(log, "reconcile.pass", level, **report.as_dict())
        return report

    def _register(self, obj: StoredObject, report: ReconcileReport) -> None:
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
            return
        report.outcomes[outcome.status] += 1
        log_event(
            log,
            "reconcile.registered_missing",
            logging.WARNING,
            object=obj.name,
            status=outcome.status,
            reason=outcome.reason or None,
        )

    def _gone(self, since: datetime, until: datetime, listed: dict[str, StoredObject]) -> list[str]:
        """Registered objects of the window that the bucket no longer has (checked one by one:
        the row's stored time and the listing's could straddle the window's edge)."""
        store = self.service.store
        base = store.uri("")
        gone = []
        for row in self.service.registry.audit.stored_between(since, until, uri_prefix=base):
            uri = row["uri"]
            if uri in listed:
                continue
            try:
                store.stat(uri[len(base) :])
            except ObjectMissing:
                gone.append(uri)
                log_event(
                    log,
                    "reconcile.object_gone",
                    logging.ERROR,
                    uri=uri,
                    dataset_id=str(row["id"]),
                )
            except ObsIngestError as exc:  # cannot tell now: not reported as gone
                log_event(log, "reconcile.stat_failed", logging.WARNING, uri=uri, error=str(exc))
        return gone
