"""The exposures-ingested check: is this exposure complete now, and if so, write its one
ExposureIngested to the outbox, exactly once, however many processes ask.

Checked *after* the registering commit: under READ COMMITTED two processes registering an
exposure's last two CCDs could each miss the other's; after the commit the later one sees both.
The outbox row is keyed by the exposure's deterministic ``event_id``, so one INSERT wins. Without
a manifest nothing is emitted. ``exposure_closure`` keeps each exposure's *first* closure (``ok``
/ ``over_budget``, or ``incomplete`` from the sweep after its deadline), which metrics count when
inserted (``Closing.counted``); a late completion still gets its event.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from sqlalchemy import Connection, and_, bindparam, func, select, update

from obsingest import camera
from obsingest.messages import ExposureIngested, IngestedStatus, IngestedStatusName, utcnow
from obsingest.registry import tables
from obsingest.registry.completeness import (
    COMPLETE,
    FROM_MANIFEST,
    INCOMPLETE,
    ExposurePresence,
    from_times,
    manifest_detectors,
    summarize,
)
from obsingest.registry.facility_tables import exposure_closure
from obsingest.registry.outbox import MARK_ASYNC_POSTGRES, OutboxMessage, insert_row_once
from obsingest.registry.prepared import Prepared, autocommit_rows
from obsingest.registry.registry import OUTBOX_LEASE_SECONDS, Registry
from obsingest.settings import run_name
from obsingest.timescales import as_utc

#: Fixed forever: an exposure's event id must be the same in every process and every release.
NAMESPACE = uuid.UUID("3d0c5a57-1f0e-5b4e-9a41-6f6273696e67")

#: what a check found
Outcome = Literal["no-manifest", "not-complete", "emitted", "already-emitted", "closed-incomplete"]
NO_MANIFEST: Final = "no-manifest"
NOT_COMPLETE: Final = "not-complete"
EMITTED: Final = "emitted"  # this call wrote the exposure's ExposureIngested
ALREADY: Final = "already-emitted"
CLOSED_INCOMPLETE: Final = "closed-incomplete"  # the sweep: deadline passed, not complete


def event_id(instrument: str, exposure: int) -> uuid.UUID:
    """The exposure's ExposureIngested id (and its outbox key)."""
    return uuid.uuid5(NAMESPACE, f"ExposureIngested/{instrument}/{exposure}")


def ingested_attributes(event: ExposureIngested) -> dict[str, str]:
    """What subscribers filter on without decoding the Avro body."""
    return {
        "instrument": event.instrument,
        "exposure": str(event.exposure),
        "status": event.status,
        "event_id": str(event.event_id),
        "schema": ExposureIngested.SCHEMA,
    }


@dataclass(frozen=True)
class Closing:
    """What one check (or one deadline close) found and did."""

    instrument: str
    exposure: int
    outcome: Outcome
    presence: ExposurePresence | None = None
    event: ExposureIngested | None = None
    message: OutboxMessage | None = None
    #: the outbox row this call wrote (leased to it for its immediate publish)
    row_id: int | None = None
    #: this call inserted the exposure's closure: count it (``status``) in the metrics, once
    counted: bool = False
    status: IngestedStatusName | Literal["incomplete", ""] = ""

    @property
    def max_latency(self) -> float:
        p = self.presence
        return p.latency_max if p is not None and p.latency_max is not None else 0.0

    @property
    def missing(self) -> int:
        return len(self.presence.missing) if self.presence is not None else 0


@dataclass(frozen=True)
class OpenExposure:
    """A manifest of the sweep's window whose exposure has not completed (no event yet)."""

    instrument: str
    exposure: int
    expected: int
    registered: int  # datasets of the exposure (any detector)
    deadline: datetime | None
    closed: str | None  # its closure status (``incomplete``), None when never closed


class IngestedCheck:
    """Completeness checks and the exposures-ingested outbox rows on one registry."""

    def __init__(
        self, registry: Registry, topic: str, budget_seconds: float, *, closed_by: str = "register"
    ) -> None:
        self.registry = registry
        self.topic = topic
        self.budget_seconds = budget_seconds
        self.closed_by = closed_by
        self.lease_seconds = OUTBOX_LEASE_SECONDS
        self.dataset_type = registry.settings.dataset_type
        self._postgres = registry._postgres
        self._build_statements()

    def _build_statements(self) -> None:
        m, c, d, r = (tables.exposure_manifest, exposure_closure, tables.dataset, tables.datastore_record)
        ours = (d.c.dataset_type == bindparam("dt"), d.c.run == bindparam("run"))
        registered = (
            select(func.count())
            .select_from(d)
            .where(*ours, d.c.instrument == m.c.instrument, d.c.exposure == m.c.exposure)
            .scalar_subquery()
            .label("registered")
        )
        same = and_(c.c.instrument == m.c.instrument, c.c.exposure == m.c.exposure)
        closed = m.outerjoin(c, same)
        # one round trip per check: most stop here (the exposure is still arriving)
        self._q_state = (
            select(m.c.detectors, m.c.expected, m.c.day_obs, registered, c.c.ingested_at)
            .select_from(closed)
            .where(m.c.instrument == bindparam("inst"), m.c.exposure == bindparam("exp"))
        )
        # PostgreSQL: the check's one read on the driver's connection (``registry.prepared``)
        self._state_sql = Prepared(self.registry.engine, self._q_state) if self._postgres else None
        self._q_rows = (
            select(d.c.detector, d.c.ingest_time, r.c.readout_time)
            .select_from(d.join(r, r.c.dataset_id == d.c.id))
            .where(*ours, d.c.instrument == bindparam("inst"), d.c.exposure == bindparam("exp"))
        )
        self._q_open = (
            select(m.c.exposure, m.c.expected, m.c.obs_start, m.c.exposure_time)
            .add_columns(registered, c.c.status)
            .select_from(closed)
            .where(
                m.c.instrument == bindparam("inst"),
                m.c.recorded_time >= bindparam("since"),
                c.c.ingested_at.is_(None),
            )
            .order_by(m.c.exposure)
        )

    def _ours(self, instrument: str) -> dict[str, Any]:
        return {"dt": self.dataset_type, "run": run_name(self.registry.settings.run, instrument)}

    def _read(self, stmt: Any, params: dict[str, Any]) -> Sequence[Any]:
        """``stmt``'s rows, on PostgreSQL in autocommit: its own snapshot, started after the
        caller's commit, without a transaction's BEGIN and ROLLBACK round trips."""

        def run() -> Sequence[Any]:
            with self.registry.engine.connect() as conn:
                if self._postgres:
                    conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                return conn.execute(stmt, params).all()

        return self.registry._retrying(run)

    def check(self, instrument: str, exposure: int, published: Sequence[int] = ()) -> Closing:
        """Write the exposure's ExposureIngested if it is complete and nobody wrote it yet;
        ``published``: outbox rows to mark published first (``mark_published``)."""
        key = {"inst": instrument, "exp": exposure, **self._ours(instrument)}
        state = self._state(key, published)
        if state is None:
            return Closing(instrument, exposure, NO_MANIFEST)
        detectors, expected_count, day_obs, registered, ingested_at = state
        if ingested_at is not None:
            return Closing(instrument, exposure, ALREADY)
        if registered < expected_count:  # the common case: still arriving
            return Closing(instrument, exposure, NOT_COMPLETE)
        expected = manifest_detectors(detectors)
        presence = self._presence(instrument, exposure, day_obs, expected, key)
        if presence.missing:  # counted CCDs the manifest did not list, and some it did missing
            return Closing(instrument, exposure, NOT_COMPLETE, presence)
        return self._emit(presence, expected)

    def _state(self, key: dict[str, Any], published: Sequence[int] = ()) -> Any:
        """The exposure's ``_q_state`` row, None without a manifest."""
        prepared = self._state_sql
        if prepared is None:
            if published:
                self.registry.outbox.mark_published(list(published))
            found = self._read(self._q_state, key)
            return found[0] if found else None
        sql, values = prepared.sql, key
        if published:
            # the mark rides on the read: a data-modifying CTE runs whatever the SELECT reads,
            # and the read's snapshot still starts after the callers' registering commits
            sql = f"WITH marked AS ({MARK_ASYNC_POSTGRES})\n{sql}"
            values = {**key, "ids": list(published), "at": utcnow()}
        args = prepared.args(values)
        rows = self.registry._retrying(lambda: autocommit_rows(self.registry.engine, sql, args))
        return rows[0] if rows else None

    def _presence(
        self, instrument: str, exposure: int, day_obs: int, expected: Sequence[int], key: dict[str, Any]
    ) -> ExposurePresence:
        rows = self._read(self._q_rows, key)
        return summarize(
            instrument,
            exposure,
            day_obs,
            expected,
            FROM_MANIFEST,
            budget_seconds=self.budget_seconds,
            **from_times(rows),
        )

    def _emit(self, presence: ExposurePresence, expected: Sequence[int]) -> Closing:
        inst, exp = presence.instrument, presence.exposure
        now = utcnow()
        status: IngestedStatusName = (
            IngestedStatus.OK if presence.status == COMPLETE else IngestedStatus.OVER_BUDGET
        )
        eid = event_id(inst, exp)
        event = ExposureIngested(
            event_id=eid,
            instrument=inst,
            exposure=exp,
            day_obs=presence.day_obs,
            dataset_type=self.dataset_type,
            run=run_name(self.registry.settings.run, inst),
            expected=presence.expected,
            registered=presence.registered,
            detectors=sorted(expected),
            missing_detectors=[],
            over_budget=list(presence.over_budget),
            last_registered=presence.last_registered or now,
            budget_seconds=self.budget_seconds,
            status=status,
            manifest_known=True,
            published_time=now,
            first_readout=presence.first_readout,
            latency_p50=presence.latency_p50,
            latency_p95=presence.latency_p95,
            latency_max=presence.latency_max,
        )
        message = OutboxMessage(self.topic, event.encode(), f"{inst}/{exp}", ingested_attributes(event))
        c = exposure_closure
        first_closure = self._first_closure(presence, status, now, eid)
        late_completion = (
            update(c)
            .where(c.c.instrument == inst, c.c.exposure == exp, c.c.ingested_at.is_(None))
            .values(ingested_at=now, event_id=eid)
        )

        def tx(conn: Connection) -> tuple[int | None, bool]:
            row_id = insert_row_once(conn, eid, message, now, self.lease_seconds)
            if row_id is None:  # another check wrote it first
                return None, False
            if conn.execute(first_closure).first() is not None:
                return row_id, True
            conn.execute(late_completion)  # closed incomplete at its deadline, complete now
            return row_id, False

        row_id, counted = self.registry._tx(tx)
        if row_id is None:
            return Closing(inst, exp, ALREADY, presence)
        return Closing(inst, exp, EMITTED, presence, event, message, row_id, counted, status)

    def _first_closure(
        self, presence: ExposurePresence, status: str, now: datetime, eid: uuid.UUID | None = None
    ) -> Any:
        """Insert the exposure's closure unless it has one (returning it when inserted)."""
        c = exposure_closure
        values = {
            "instrument": presence.instrument,
            "exposure": presence.exposure,
            "status": status,
            "closed_by": self.closed_by,
            "closed_at": now,
            "missing": len(presence.missing),
            "latency_max": presence.latency_max,
            "ingested_at": now if eid is not None else None,
            "event_id": eid,
        }
        return self.registry._insert(c).values(values).on_conflict_do_nothing().returning(c.c.exposure)

    def close_incomplete(self, instrument: str, exposure: int) -> Closing:
        """The exposure's deadline passed: close it ``incomplete`` unless closed before, or emit
        its event if it is complete after all."""
        key = {"inst": instrument, "exp": exposure, **self._ours(instrument)}
        state = self._state(key)
        if state is None:
            return Closing(instrument, exposure, NO_MANIFEST)
        detectors, _, day_obs, _, _ = state
        presence = self._presence(instrument, exposure, day_obs, manifest_detectors(detectors), key)
        if not presence.missing:  # completed after all (its check was lost): its event
            return self.check(instrument, exposure)
        stmt = self._first_closure(presence, INCOMPLETE, utcnow())
        counted = self.registry._tx(lambda conn: conn.execute(stmt).first()) is not None
        return Closing(instrument, exposure, CLOSED_INCOMPLETE, presence, counted=counted, status=INCOMPLETE)

    def open_exposures(self, since: datetime, allowance: float) -> list[OpenExposure]:
        """Manifests recorded since ``since`` whose exposure has no event yet, oldest first."""
        found: list[OpenExposure] = []
        for instrument in camera.INSTRUMENTS:
            params = {"inst": instrument, "since": since, **self._ours(instrument)}
            rows = self._read(self._q_open, params)
            for exposure, expected, obs_start, exposure_time, registered, closed in rows:
                start = as_utc(obs_start)
                try:
                    deadline = start and start + timedelta(seconds=(exposure_time or 0.0) + allowance)
                except OverflowError:  # no such instant (an impossible manifest): never overdue
                    deadline = None
                found.append(OpenExposure(instrument, exposure, expected, registered, deadline, closed))
        return found

    def sweep(self, since: datetime, allowance: float) -> list[Closing]:
        """Emit what a lost check left complete and unannounced, close the exposures whose
        deadline passed; the closings that did something, oldest first."""
        now = utcnow()
        done: list[Closing] = []
        for item in self.open_exposures(since, allowance):
            # overdue first: as many CCDs as expected may still miss one (an unlisted one counted)
            if item.closed is None and item.deadline is not None and item.deadline <= now:
                closing = self.close_incomplete(item.instrument, item.exposure)  # or its event
            elif item.registered >= item.expected:
                closing = self.check(item.instrument, item.exposure)
            else:
                continue
            if closing.outcome in (EMITTED, CLOSED_INCOMPLETE):
                done.append(closing)
        return done
