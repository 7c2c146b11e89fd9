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

import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from obsingest.exhaustion import as_exhausted
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
            from obsingest.registry.registry import RegistryUnavailable  # registry imports this module

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


def db_datetime(value: Any) -> datetime | None:
    """A timestamp as the driver returns it (SQLite: text, naive UTC) -> aware UTC datetime."""
    if value is None:
        return None
    return as_utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def uuid_param(engine: Engine, value: uuid.UUID) -> Any:
    """A UUID as the driver takes it for a ``Uuid`` column (SQLite: 32 hex digits)."""
    return value if engine.dialect.name == "postgresql" else value.hex
