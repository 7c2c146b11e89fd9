"""The reconcile service's registry queries: batched lookups by URI, rows stored in a time
window, and the canary log (written by reconcile, marked seen by the register function)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from obsingest.registry import tables
from obsingest.registry.facility_tables import canary
from obsingest.timescales import as_utc

T = TypeVar("T")

#: URIs per IN (...) lookup: far below every backend's parameter limit.
_BATCH = 500


@dataclass(frozen=True)
class CanaryRecord:
    name: str
    written_at: datetime | None
    seen_at: datetime | None


def chunks(items: list[T], size: int = _BATCH) -> Iterable[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class EngineQueries:
    """Queries on one registry engine; ``retrying`` (the registry's) wraps each transaction."""

    def __init__(self, engine: Engine, retrying: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        self.engine = engine
        self._retrying = retrying or (lambda fn: fn())
        self._postgres = engine.dialect.name == "postgresql"
        self._insert = postgresql.insert if self._postgres else sqlite.insert

    def _run(self, fn: Callable[[Connection], T]) -> T:
        def run() -> T:
            with self.engine.connect() as conn:
                return fn(conn)

        result: T = self._retrying(run)
        return result

    def _in_tx(self, fn: Callable[[Connection], T]) -> T:
        """One attempt of ``_tx``: ``fn`` in a transaction."""
        with self.engine.begin() as conn:
            return fn(conn)

    def _tx(self, fn: Callable[[Connection], T]) -> T:
        result: T = self._retrying(lambda: self._in_tx(fn))
        return result


class RegistryAudit(EngineQueries):
    def registered_uris(self, uris: Iterable[str]) -> set[str]:
        """Which of ``uris`` have a datastore record."""
        return self._present(tables.datastore_record.c.uri, uris)

    def quarantined_uris(self, uris: Iterable[str]) -> set[str]:
        """Which of ``uris`` were refused with a reason (a quarantine record names them)."""
        return self._present(tables.quarantine.c.object_uri, uris)

    def _present(self, column: Any, uris: Iterable[str]) -> set[str]:
        wanted = sorted(set(uris))

        def query(conn: Connection) -> set[str]:
            found: set[str] = set()
            for chunk in chunks(wanted):
                found.update(conn.execute(select(column).where(column.in_(chunk))).scalars())
            return found

        return self._run(query) if wanted else set()

    def stored_between(self, start: datetime, end: datetime, uri_prefix: str = "") -> list[dict[str, Any]]:
        """Registered files stored in [start, end) under ``uri_prefix``: dataset id, data id, URI."""
        d, r = tables.dataset, tables.datastore_record
        query = (
            select(d.c.id, d.c.instrument, d.c.exposure, d.c.detector, r.c.uri, r.c.stored_time)
            .join(r, r.c.dataset_id == d.c.id)
            .where(r.c.stored_time >= start, r.c.stored_time < end)
            .order_by(r.c.stored_time)
        )
        if uri_prefix:
            query = query.where(r.c.uri.startswith(uri_prefix, autoescape=True))
        return self._run(lambda c: [dict(m) for m in c.execute(query).mappings()])

    def canary_written(self, name: str, at: datetime) -> None:
        """Record a canary about to be written (before the object: its event cannot come first)."""
        stmt = self._insert(canary).values(name=name, written_at=at, seen_at=None)
        stmt = stmt.on_conflict_do_update(index_elements=[canary.c.name], set_={"written_at": at})
        self._tx(lambda c: c.execute(stmt))

    def canary_seen(self, name: str, at: datetime) -> None:
        """The register function saw the canary's finalize event (first sighting wins)."""
        stmt = self._insert(canary).values(name=name, written_at=None, seen_at=at)
        stmt = stmt.on_conflict_do_update(
            index_elements=[canary.c.name],
            set_={"seen_at": func.coalesce(canary.c.seen_at, stmt.excluded.seen_at)},
        )
        self._tx(lambda c: c.execute(stmt))

    def canaries(self, since: datetime) -> list[CanaryRecord]:
        """Canaries written since ``since``, oldest first."""
        query = select(canary).where(canary.c.written_at >= since).order_by(canary.c.written_at)
        rows = self._run(lambda c: list(c.execute(query).mappings()))
        return [CanaryRecord(row["name"], as_utc(row["written_at"]), as_utc(row["seen_at"])) for row in rows]

    def last_canary_written(self) -> datetime | None:
        """When any process last wrote a canary."""
        value = self._run(lambda c: c.execute(select(func.max(canary.c.written_at))).scalar())
        return as_utc(value)

    def purge_canaries(self, older_than: timedelta, now: datetime | None = None) -> int:
        now = now or datetime.now(UTC)
        cutoff = now - older_than
        stmt = delete(canary).where(func.coalesce(canary.c.written_at, canary.c.seen_at) < cutoff)
        deleted = self._tx(lambda c: c.execute(stmt).rowcount)
        return max(int(deleted or 0), 0)
