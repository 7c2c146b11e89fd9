"""The arrivals outbox: "registered" and "to be announced" commit together, or not at all.

Rows (a new dataset's ArrivalEvent, a complete exposure's ExposureIngested) are inserted with the
registration, published right after the commit and marked; what could not be published stays
pending for a drain (``claim`` -> publish -> ``mark_published``). Claims are leases
(``lease_until``) taken by one ``UPDATE ... RETURNING`` (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), not open transactions: a dead publisher's rows go out again when its lease expires
(subscribers deduplicate on dataset id).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from obsingest.registry.audit import EngineQueries
from obsingest.registry.facility_tables import arrival_outbox
from obsingest.registry.prepared import autocommit_rows
from obsingest.timescales import as_utc

#: Longest error text kept on a row (the reason a publish failed, for the operator).
_ERROR_CHARS = 500


@dataclass(frozen=True)
class OutboxMessage:
    """What to publish once the dataset is committed: topic, body, key and attributes."""

    topic: str
    payload: bytes
    key: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OutboxRow:
    id: int
    dataset_id: uuid.UUID
    message: OutboxMessage
    created_at: datetime
    attempts: int = 0


@dataclass(frozen=True)
class OutboxStatus:
    """What an operator (or a metric) wants to know: how much is waiting, and for how long."""

    pending: int
    oldest_pending_age: float | None  # seconds, None when nothing is pending
    #: rows published and not purged yet (None: not counted, ``status(published=False)``)
    published: int | None


_INSERT = arrival_outbox.insert().returning(arrival_outbox.c.id, arrival_outbox.c.dataset_id)
_MARK = (
    update(arrival_outbox)
    .where(arrival_outbox.c.id.in_(bindparam("ids", expanding=True)), arrival_outbox.c.published_at.is_(None))
    .values(published_at=bindparam("at"), lease_until=None, last_error="")
)
#: ``_MARK`` on PostgreSQL, committing without waiting for its WAL flush (``mark_published``)
MARK_ASYNC_POSTGRES = """\
UPDATE arrival_outbox SET published_at = %(at)s, lease_until = NULL, last_error = ''
WHERE id = ANY(%(ids)s) AND published_at IS NULL
  AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'"""


#: a row no drain holds: no lease, or one that expired before ``:now``
_FREE = or_(arrival_outbox.c.lease_until.is_(None), arrival_outbox.c.lease_until < bindparam("now"))


def _lease(*where: Any) -> Any:
    """Lease the unpublished rows free at ``:now`` that ``where`` picks, until ``:until``."""
    o = arrival_outbox
    return (
        update(o)
        .where(*where, o.c.published_at.is_(None), _FREE)
        .values(lease_until=bindparam("until"))
        .returning(*o.c)
    )


def _claim_statement(postgres: bool) -> Any:
    """Lease up to ``:limit`` free unpublished rows (``ArrivalOutbox.claim``'s order)."""
    o = arrival_outbox
    candidates = (
        select(o.c.id)
        .where(o.c.published_at.is_(None), _FREE)
        # published_at (NULL in every candidate) first, as in ix_arrival_outbox_pending: so the
        # planners (PostgreSQL's and SQLite's) read that index in order instead of sorting
        .order_by(o.c.published_at, o.c.attempts, o.c.id)
        .limit(bindparam("limit"))
    )
    if postgres:
        candidates = candidates.with_for_update(skip_locked=True)
    # A materialized CTE, not ``IN (subquery)``: PostgreSQL may run a LIMIT ... SKIP LOCKED
    # subquery more than once inside an UPDATE and so claim more than ``limit`` rows. The
    # lease condition is repeated on the UPDATE: a row a concurrent drain claimed first is
    # re-checked by PostgreSQL and skipped, never claimed twice.
    chosen = candidates.cte("outbox_claim").prefix_with("MATERIALIZED", dialect="postgresql")
    return _lease(o.c.id == chosen.c.id)


_CLAIM = _claim_statement(postgres=False)
_CLAIM_POSTGRES = _claim_statement(postgres=True)
#: lease one dataset's row (``:ds``) if it is unpublished and free at ``:now``, until ``:until``
_CLAIM_DATASET = _lease(arrival_outbox.c.dataset_id == bindparam("ds"))


def insert_row(
    conn: Connection, dataset_id: uuid.UUID, message: OutboxMessage, now: datetime, lease_seconds: float
) -> int:
    """Add the announcement of ``dataset_id`` in the caller's transaction; returns the row id."""
    return insert_rows(conn, [(dataset_id, message)], now, lease_seconds)[dataset_id]


def insert_rows(
    conn: Connection, entries: list[tuple[uuid.UUID, OutboxMessage]], now: datetime, lease_seconds: float
) -> dict[uuid.UUID, int]:
    """``insert_row`` for many datasets in one statement: dataset id -> row id."""
    if not entries:
        return {}
    rows = [outbox_values(ds_id, message, now, lease_seconds) for ds_id, message in entries]
    found = conn.execute(_INSERT, rows)
    return {as_uuid(row.dataset_id): int(row.id) for row in found}


def as_uuid(value: Any) -> uuid.UUID:
    """A dataset id as the driver returns it (UUID on PostgreSQL, text or bytes on SQLite)."""
    if isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(str(value))


def outbox_values(
    dataset_id: uuid.UUID, message: OutboxMessage, now: datetime, lease_seconds: float
) -> dict[str, object]:
    """An outbox row's values: pending, leased to its writer for the immediate publish."""
    return {
        "dataset_id": dataset_id,
        "topic": message.topic,
        "message_key": message.key,
        "attributes": json.dumps(message.attributes, sort_keys=True),
        "payload": message.payload,
        "created_at": now,
        "lease_until": now + timedelta(seconds=lease_seconds),
        "attempts": 0,
        "last_error": "",
    }


def insert_row_once(
    conn: Connection, key: uuid.UUID, message: OutboxMessage, now: datetime, lease_seconds: float
) -> int | None:
    """Add an announcement under ``key`` unless one exists: its row id, or None when another
    caller's row exists (PostgreSQL makes a concurrent second insert wait, then skip)."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    o = arrival_outbox
    stmt = (
        insert(o)
        .values(outbox_values(key, message, now, lease_seconds))
        .on_conflict_do_nothing(index_elements=[o.c.dataset_id])
        .returning(o.c.id)
    )
    row = conn.execute(stmt).first()
    return None if row is None else int(row[0])


def _row(mapping: Any) -> OutboxRow:
    return OutboxRow(
        id=int(mapping["id"]),
        dataset_id=mapping["dataset_id"],
        message=OutboxMessage(
            topic=mapping["topic"],
            payload=bytes(mapping["payload"]),
            key=mapping["message_key"],
            attributes=json.loads(mapping["attributes"] or "{}"),
        ),
        created_at=as_utc(mapping["created_at"]) or datetime.now(UTC),
        attempts=int(mapping["attempts"] or 0),
    )


class ArrivalOutbox(EngineQueries):
    """Drain-side operations (claim, mark, status, purge) on one registry's outbox."""

    def _leased(
        self, stmt: Any, now: datetime | None, lease_seconds: float, **params: Any
    ) -> list[OutboxRow]:
        now = now or datetime.now(UTC)
        params.update(now=now, until=now + timedelta(seconds=lease_seconds))
        rows = self._tx(lambda c: [_row(m) for m in c.execute(stmt, params).mappings()])
        return sorted(rows, key=lambda r: (r.attempts, r.id))

    def _update_pending(self, where: Any, **values: Any) -> None:
        """Set ``values`` on the rows ``where`` picks that are still unpublished."""
        o = arrival_outbox
        self._tx(lambda c: c.execute(update(o).where(where, o.c.published_at.is_(None)).values(**values)))

    def claim(
        self, limit: int = 100, lease_seconds: float = 30.0, now: datetime | None = None
    ) -> list[OutboxRow]:
        """Lease up to ``limit`` unpublished rows whose lease expired: those that failed fewest
        times first, then the oldest (a drain stops at a failure: a row that always fails, a
        topic gone for good, must not hold back the rows behind it)."""
        return self._leased(_CLAIM_POSTGRES if self._postgres else _CLAIM, now, lease_seconds, limit=limit)

    def claim_dataset(
        self, dataset_id: uuid.UUID, lease_seconds: float = 30.0, now: datetime | None = None
    ) -> OutboxRow | None:
        """Lease the row of one dataset if it is unpublished and free (a redelivery found the
        dataset registered but not announced); None otherwise."""
        found = self._leased(_CLAIM_DATASET, now, lease_seconds, ds=dataset_id)
        return found[0] if found else None

    def mark_published(self, row_ids: list[int], at: datetime | None = None) -> None:
        """Record rows as published; on PostgreSQL with ``synchronous_commit = off`` (no WAL flush
        wait per CCD): a mark lost in a crash leaves its row for a drain to publish again."""
        if not row_ids:
            return
        params = {"ids": list(row_ids), "at": at or datetime.now(UTC)}
        if not self._postgres:
            self._tx(lambda c: c.execute(_MARK, params))
            return
        self._retrying(lambda: autocommit_rows(self.engine, MARK_ASYNC_POSTGRES, params))

    def mark_failed(self, row_id: int, error: str, retry_after: float, now: datetime | None = None) -> None:
        """Keep the row pending with the reason; no drain takes it for ``retry_after`` s."""
        now = now or datetime.now(UTC)
        o = arrival_outbox
        self._update_pending(
            o.c.id == row_id,
            lease_until=now + timedelta(seconds=retry_after),
            attempts=o.c.attempts + 1,
            last_error=error[:_ERROR_CHARS],
        )

    def release(self, row_ids: list[int], retry_after: float, now: datetime | None = None) -> None:
        """Give claimed rows back, to be taken again in ``retry_after`` seconds."""
        if not row_ids:
            return
        now = now or datetime.now(UTC)
        self._update_pending(
            arrival_outbox.c.id.in_(row_ids), lease_until=now + timedelta(seconds=retry_after)
        )

    def status(self, now: datetime | None = None, published: bool = True) -> OutboxStatus:
        """Pending rows and the oldest one's age; with ``published``, how many published rows are
        kept (a count over a week's rows: the facility's every-pass gauge skips it)."""
        now = now or datetime.now(UTC)
        o = arrival_outbox
        done: int | None = None
        with self.engine.connect() as conn:
            pending, oldest = conn.execute(
                select(func.count(), func.min(o.c.created_at)).where(o.c.published_at.is_(None))
            ).one()
            if published:
                done = int(
                    conn.execute(select(func.count()).where(o.c.published_at.is_not(None))).scalar_one()
                )
        oldest_utc = as_utc(oldest)
        age = (now - oldest_utc).total_seconds() if oldest_utc else None
        return OutboxStatus(int(pending), age, done)

    def row(self, dataset_id: uuid.UUID) -> dict[str, Any] | None:
        """The outbox row of one dataset (retried: a redelivery's answer depends on it)."""
        o = arrival_outbox
        found = self._run(
            lambda c: c.execute(select(o).where(o.c.dataset_id == dataset_id)).mappings().first()
        )
        return dict(found) if found is not None else None

    def purge(self, older_than: timedelta, batch: int = 1000, now: datetime | None = None) -> int:
        """Delete every row published more than ``older_than`` ago, ``batch`` per transaction
        (a night is ~190,000 rows; the facility purges once an hour); how many."""
        now = now or datetime.now(UTC)
        o = arrival_outbox
        old = (
            select(o.c.id)
            .where(o.c.published_at.is_not(None), o.c.published_at < now - older_than)
            # in published order: each batch reads its rows from the published_at index and stops
            # (in id order PostgreSQL read and sorted every row past the retention, each batch)
            .order_by(o.c.published_at)
            .limit(batch)
        )
        stmt = delete(o).where(o.c.id.in_(old.scalar_subquery()))
        total = 0
        while True:
            deleted = max(int(self._tx(lambda c: c.execute(stmt).rowcount) or 0), 0)
            total += deleted
            if deleted < batch:
                return total
