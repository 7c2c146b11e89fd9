"""Statements run on the driver's own connection, for the hot paths (presence reads, the
PostgreSQL register path): SQLAlchemy's per-execution work, and a transaction's BEGIN and COMMIT
round trips, cost more than such a small statement (one statement is atomic by itself in
autocommit). Statements are SQLAlchemy Core; only their execution skips it."""

from __future__ import annotations

import uuid
from contextlib import closing
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import Engine, bindparam, event, insert, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from obsingest.exhaustion import as_exhausted
from obsingest.registry import tables
from obsingest.registry.db_errors import RegistryUnavailable
from obsingest.registry.facility_tables import arrival_outbox
from obsingest.timescales import as_utc


class Prepared:
    """One statement, compiled for ``engine``; ``rows(values)`` runs it."""

    def __init__(self, engine: Engine, statement: ClauseElement) -> None:
        compiled = cast(SQLCompiler, statement.compile(dialect=engine.dialect))
        self.engine = engine
        self.sql = str(compiled)
        # the statement's own constants (LIMITs, function arguments); the caller gives the rest
        self._defaults = {name: bind.effective_value for name, bind in compiled.binds.items()}
        self._order = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._errors = engine.dialect.loaded_dbapi.Error
        _mark_pooled(engine)

    def args(self, values: dict[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        merged = {**self._defaults, **values}
        return tuple(merged[name] for name in self._order) if self._order is not None else merged

    def rows(self, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The statement's rows; a pooled connection the server closed since (a restart) is
        replaced and the statement run again, so no request fails for a stale pool."""
        while True:
            conn = self.engine.raw_connection()
            try:
                with closing(conn.cursor()) as cursor:
                    cursor.execute(self.sql, self.args(values))
                    return list(cursor.fetchall())
            except self._errors as exc:
                driver = conn.driver_connection
                stale = conn.info.get("pooled") and self.engine.dialect.is_disconnect(exc, driver, None)
                conn.invalidate(exc)  # a connection in an unknown state never goes back to the pool
                if stale:  # invalidating cleared its mark: each stale connection is tried once
                    continue
                where = self.engine.url.render_as_string(hide_password=True)
                raise as_exhausted(exc, "registry", where) or RegistryUnavailable(
                    f"registry query failed: {type(exc).__name__}: {exc}"
                ) from exc
            finally:
                conn.close()


def _mark_pooled(engine: Engine) -> None:
    """Mark ``engine``'s connections that go back to its pool (``_pooled``), once per engine."""
    if not event.contains(engine, "checkin", _pooled):
        event.listen(engine, "checkin", _pooled)


def _pooled(dbapi_conn: Any, record: Any) -> None:
    """(pool checkin) Mark a connection that went back to the pool: it may be stale later."""
    if dbapi_conn is not None:
        record.info["pooled"] = True


def autocommit_rows(engine: Engine, sql: str, params: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` (the driver's paramstyle) in autocommit on a pooled connection; its rows. A
    driver error is raised as SQLAlchemy's ``DBAPIError``, so ``db_errors.classify`` applies
    (invalidated only when the connection broke: a value refused is the input's fault). Pooled
    connections the server closed since (a restart) are replaced at once, as ``Prepared.rows``
    does: not one per retry, each after a backoff (a pool larger than the attempts failed)."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    _mark_pooled(engine)
    while True:
        conn = engine.raw_connection()
        driver: Any = conn.driver_connection
        done = False
        try:
            driver.autocommit = True
            cursor = driver.execute(sql, params)
            rows = list(cursor.fetchall()) if cursor.description is not None else []
            driver.autocommit = False
            done = True
            return rows
        except dbapi_error as exc:
            broken = engine.dialect.is_disconnect(exc, driver, None)
            if not (broken and conn.info.get("pooled")):  # stale: the next connection, below
                raise DBAPIError.instance(
                    sql, params, exc, dbapi_error, connection_invalidated=broken, dialect=engine.dialect
                ) from exc
        finally:
            if not done:
                conn.invalidate()  # in an unknown state (autocommit on, or broken): never reused
            conn.close()


@cache
def register_at_once_sql(
    dataset_keys: tuple[str, ...], datastore_keys: tuple[str, ...], outbox_keys: tuple[str, ...]
) -> str:
    """PostgreSQL: a new dataset, its datastore record and its outbox row in one statement (one
    round trip, atomic in autocommit), answering the inserted dataset's id (NULL when the dataset
    exists) and the outbox row's id. Built from the row builders' keys, so a column added to one
    is in it too; the psycopg dialect casts each parameter to its column's type without a length
    (a cast to ``varchar(n)`` would truncate a too-long value where an insert refuses it)."""
    d = tables.dataset
    ds = postgresql.insert(d).values({k: bindparam(k, type_=d.c[k].type) for k in dataset_keys})
    ds_id = ds.on_conflict_do_nothing().returning(d.c.id).cte("ds")

    def from_ds(table: Any, keys: tuple[str, ...]) -> Any:
        values = (ds_id.c.id if k == "dataset_id" else bindparam(k, type_=table.c[k].type) for k in keys)
        return insert(table).from_select(list(keys), select(*values))

    dr = from_ds(tables.datastore_record, datastore_keys).cte("dr")
    ob = from_ds(arrival_outbox, outbox_keys).returning(arrival_outbox.c.id).cte("ob")
    stmt = select(select(ds_id.c.id).scalar_subquery(), select(ob.c.id).scalar_subquery()).add_cte(dr)
    return str(stmt.compile(dialect=psycopg.dialect()))  # type: ignore[no-untyped-call]


def db_datetime(value: Any) -> datetime | None:
    """A timestamp as the driver returns it (SQLite: text, naive UTC) -> aware UTC datetime."""
    if value is None:
        return None
    return as_utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def uuid_param(engine: Engine, value: uuid.UUID) -> Any:
    """A UUID as the driver takes it for a ``Uuid`` column (SQLite: 32 hex digits)."""
    return value if engine.dialect.name == "postgresql" else value.hex
