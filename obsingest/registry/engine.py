"""Engine construction: one bounded pool per process, tuned per backend.

PostgreSQL: a small fixed pool, so a burst of invocations queues for a connection instead of
exhausting ``max_connections``. SQLite: WAL, a busy timeout, and IMMEDIATE transactions so
concurrent writers wait for the lock instead of failing on upgrade.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event

from obsingest.settings import RegistrySettings


def psycopg_url(url: str) -> str:
    """A ``postgresql://`` URL with the psycopg 3 driver named; any other URL unchanged."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def pool_options(settings: RegistrySettings) -> dict[str, Any]:
    return {
        "pool_size": settings.pool_size,
        "max_overflow": settings.max_overflow,
        "pool_timeout": settings.pool_timeout,
    }


def make_engine(settings: RegistrySettings) -> Engine:
    url, pool = psycopg_url(settings.url), pool_options(settings)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **pool)
        _sqlite_tuning(engine)
        return engine
    return create_engine(
        url,
        **pool,
        # No pre-ping (a round trip per checkout): a connection the server closed fails its
        # statement, is invalidated, and Registry's retry runs the transaction on a fresh one.
        pool_recycle=1800,
    )


def _sqlite_tuning(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
