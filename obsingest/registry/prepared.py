"""Statements run on the driver's own connection: the presence reads' and the PostgreSQL register
path's hot paths.

Why: SQLAlchemy's per-execution work costs as much as the query itself on SQLite, and the
presence API answers hundreds of lookups a second; for a registration's small statements it and
a transaction's BEGIN and COMMIT round trips cost the caller more CPU than the statement costs
the server (one statement is atomic by itself in autocommit). Statements stay SQLAlchemy Core or
are built from its tables; only execution skips the layer. A driver error invalidates the
connection, as SQLAlchemy would.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql
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
        # the statement's own constants (LIMITs, function arguments) by bind name; the caller
        # gives the named parameters
        self._defaults = {name: bind.effective_value for name, bind in compiled.binds.items()}
        self._order = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._errors = engine.dialect.loaded_dbapi.Error

    def args(self, values: dict[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        merged = {**self._defaults, **values}
        return tuple(merged[name] for name in self._order) if self._order is not None else merged

    def rows(self, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        conn = self.engine.raw_connection()
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(self.sql, self.args(values))
                return list(cursor.fetchall())
            finally:
                cursor.close()
        except self._errors as exc:
            conn.invalidate(exc)  # a connection in an unknown state never goes back to the pool
            where = self.engine.url.render_as_string(hide_password=True)
            raise as_exhausted(exc, "registry", where) or RegistryUnavailable(
                f"registry query failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            conn.close()


def autocommit_rows(engine: Engine, sql: str, params: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` (the driver's paramstyle) with ``params`` in autocommit on a pooled
    connection; its rows (none for a statement without a result). The connection goes back to
    the pool as it came (not autocommit), or is discarded if anything failed. A driver error is
    raised as SQLAlchemy would (``DBAPIError``), so ``db_errors.classify`` and the retries apply."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    conn = engine.raw_connection()
    done = False
    try:
        driver: Any = conn.driver_connection
        driver.autocommit = True
        cursor = driver.execute(sql, params)
        rows = list(cursor.fetchall()) if cursor.description is not None else []
        driver.autocommit = False
        done = True
        return rows
    except dbapi_error as exc:
        raise DBAPIError.instance(
            sql, params, exc, dbapi_error, connection_invalidated=True, dialect=engine.dialect
        ) from exc
    finally:
        if not done:
            conn.invalidate()  # in an unknown state (autocommit on, or broken): never reused
        conn.close()


_POSTGRES = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's dialect classes


def _pg_cast(column: Any) -> str:
    """``column``'s PostgreSQL type for a parameter cast, without a length: an explicit cast to
    ``varchar(n)`` truncates silently, where an insert of a too-long value is refused."""
    return re.sub(r"\(\d+\)", "", column.type.compile(dialect=_POSTGRES))


def _insert_from_ds(table: Any, keys: Sequence[str], returning: str = "") -> str:
    """``INSERT INTO table (keys) SELECT ... FROM ds``: ``dataset_id`` is the id ``ds``
    inserted, every other value a parameter cast to its column's type."""
    values = ", ".join(
        "id" if key == "dataset_id" else f"%({key})s::{_pg_cast(table.c[key])}" for key in keys
    )
    return f"INSERT INTO {table.name} ({', '.join(keys)}) SELECT {values} FROM ds{returning}"


@cache
def register_at_once_sql(
    dataset_keys: tuple[str, ...], datastore_keys: tuple[str, ...], outbox_keys: tuple[str, ...]
) -> str:
    """PostgreSQL: a new dataset, its datastore record and its outbox row in one statement (one
    round trip, atomic in autocommit); it answers the inserted dataset's id (NULL when the
    dataset exists) and the outbox row's id. Built from the tables and the row builders' keys,
    so a column added to either is in this statement too."""
    table = tables.dataset
    values = ", ".join(f"%({key})s::{_pg_cast(table.c[key])}" for key in dataset_keys)
    return (
        f"WITH ds AS (INSERT INTO {table.name} ({', '.join(dataset_keys)}) VALUES ({values})"
        " ON CONFLICT DO NOTHING RETURNING id),"
        f" dr AS ({_insert_from_ds(tables.datastore_record, datastore_keys)}),"
        f" ob AS ({_insert_from_ds(arrival_outbox, outbox_keys, ' RETURNING id')})"
        " SELECT (SELECT id FROM ds), (SELECT id FROM ob)"
    )


def db_datetime(value: Any) -> datetime | None:
    """A timestamp as the driver returns it (SQLite: text, naive UTC) -> aware UTC datetime."""
    if value is None:
        return None
    return as_utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def uuid_param(engine: Engine, value: uuid.UUID) -> Any:
    """A UUID as the driver takes it for a ``Uuid`` column (SQLite: 32 hex digits)."""
    return value if engine.dialect.name == "postgresql" else value.hex
