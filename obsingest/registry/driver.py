"""One statement in autocommit on the driver's own connection (the register path on PostgreSQL).

Why: for a registration's small statements, SQLAlchemy's per-execution work and a transaction's
BEGIN and COMMIT round trips cost the caller more CPU than the statement costs the server; one
statement is atomic by itself in autocommit. A driver error is raised as SQLAlchemy would
(``DBAPIError``, connection invalidated), so ``db_errors.classify`` and the retries still apply.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError


def autocommit_rows(engine: Engine, sql: str, params: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` (the driver's paramstyle) with ``params`` in autocommit on a pooled
    connection; its rows (none for a statement without a result). The connection goes back to
    the pool as it came (not autocommit), or is discarded if anything failed."""
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
