"""Statements compiled once and run on the driver's own cursor: the presence reads' hot path.

Why: SQLAlchemy's per-execution work costs as much as the query itself on SQLite, and the
presence API answers hundreds of lookups a second. Statements stay SQLAlchemy Core; only
execution skips the layer. A driver error invalidates the connection and becomes
``RegistryUnavailable``, as SQLAlchemy would.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Engine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from obsingest.exhaustion import as_exhausted
from obsingest.registry.registry import RegistryUnavailable
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


def db_datetime(value: Any) -> datetime | None:
    """A timestamp as the driver returns it (SQLite: text, naive UTC) -> aware UTC datetime."""
    if value is None:
        return None
    return as_utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def uuid_param(engine: Engine, value: uuid.UUID) -> Any:
    """A UUID as the driver takes it for a ``Uuid`` column (SQLite: 32 hex digits)."""
    return value if engine.dialect.name == "postgresql" else value.hex
