"""Engine construction: one bounded pool per process, tuned per backend.

PostgreSQL: a small fixed pool, so a burst of invocations queues for a connection instead of
exhausting ``max_connections``. SQLite: WAL, a busy timeout, and IMMEDIATE transactions so
concurrent writers wait for the lock instead of failing on upgrade.

A read-only engine (the presence API, ``obsingest status``) is read-only at the database (SQLite
``mode=ro`` and ``query_only``, PostgreSQL ``default_transaction_read_only``); a ``butler:<repo>``
URL reads the companion tables. No migration is run: ``require_tables`` says what is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url

from obsingest.errors import PermanentError
from obsingest.registry.butler_repo import ButlerSettings, default_companion_url, is_butler_url, repo_of
from obsingest.settings import RegistrySettings

#: how much of a SQLite registry a reader maps into memory (a night of LSSTCam: ~150 MB)
SQLITE_MMAP_BYTES = 1 << 30


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


#: libpq's bounds on a PostgreSQL server that stops answering without closing the connection
#: (host down, network partition: no RST), which would otherwise hang a call for the kernel's
#: ~15 min of retransmissions: a connect gives up after ``connect_timeout`` s; data or keepalive
#: probes (an idle wait for a reply) unacknowledged for ``tcp_user_timeout`` ms end the
#: connection. A busy server acknowledges both: a long statement is never cut. A key the URL
#: sets is the URL's.
POSTGRES_LIVENESS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}


def postgres_connect_args(url: str, settings: RegistrySettings, *options: str) -> dict[str, Any]:
    """psycopg's connection arguments: ``POSTGRES_LIVENESS``; a lock wait bounded by the retry
    deadline (a statement behind another session's lock, e.g. one whose client died in its
    transaction and which the server keeps for hours, fails as lock-not-available, transient:
    past the deadline redelivery retries), after the URL's own ``options``."""
    lock_timeout = f"-c lock_timeout={max(1, round(settings.retry_deadline * 1000))}"
    query = make_url(url).query
    given = query.get("options", "")
    given = given if isinstance(given, str) else " ".join(given)
    liveness = {key: value for key, value in POSTGRES_LIVENESS.items() if key not in query}
    return {**liveness, "options": " ".join(filter(None, (given, lock_timeout, *options)))}


def open_butler(repo: str, writeable: bool = False) -> Any:
    """A daf_butler Butler on ``repo``. daf_butler builds its own engine for a PostgreSQL registry,
    without our bounds: they go into its URL as libpq parameters (``POSTGRES_LIVENESS``; a key the
    URL sets is the URL's), else a server gone without a RST hangs an ingest for ~15 min."""
    from lsst.daf.butler import Butler, ButlerConfig

    config = ButlerConfig(repo)
    db = config.get(("registry", "db"))
    if isinstance(db, str) and db.startswith("postgresql"):
        url = make_url(db)
        bounds = {key: str(value) for key, value in POSTGRES_LIVENESS.items() if key not in url.query}
        config["registry", "db"] = url.update_query_dict(bounds).render_as_string(hide_password=False)
    return Butler.from_config(config, writeable=writeable)


def make_engine(settings: RegistrySettings) -> Engine:
    url, pool = psycopg_url(settings.url), pool_options(settings)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **pool)
        _sqlite_tuning(engine)
        return engine
    return create_engine(
        url,
        connect_args=postgres_connect_args(url, settings),
        **pool,
        # no pre-ping (a round trip per checkout): Registry's retry replaces a closed connection
        pool_recycle=1800,
    )


def _sqlite_tuning(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=30000"):
            dbapi_conn.execute(f"PRAGMA {pragma}").close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class RegistryNotReadable(PermanentError, reason="registry-not-readable"):
    """The registry cannot be read: no such database, or a schema older than the reader's."""


def readonly_url(url: str) -> str:
    """The database URL a reader opens for registry URL ``url`` (``butler:`` -> companion)."""
    if is_butler_url(url):
        return ButlerSettings().companion_url or default_companion_url(repo_of(url))
    return url


def make_readonly_engine(settings: RegistrySettings) -> Engine:
    url, pool = psycopg_url(readonly_url(settings.url)), pool_options(settings)
    if url.startswith("sqlite"):
        path = make_url(url).database
        if not path or path == ":memory:":
            raise RegistryNotReadable(f"{url!r}: an in-memory SQLite registry has nothing to read")
        file = Path(path)
        if not file.is_file():
            raise RegistryNotReadable(f"no registry database at {file} (from {url!r})")
        # file: URI so that mode=ro reaches SQLite; the WAL's -shm must be there or creatable
        uri = f"sqlite:///file:{quote(str(file.resolve()))}?mode=ro&uri=true"
        engine = create_engine(uri, connect_args={"check_same_thread": False}, **pool)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # mmap: reads of random CCDs touch pages all over a night: map the file (the OS page
            # cache, shared by every connection) instead of a read() per page miss
            for pragma in ("query_only=ON", "busy_timeout=5000", f"mmap_size={SQLITE_MMAP_BYTES}"):
                dbapi_conn.execute(f"PRAGMA {pragma}").close()

        return engine
    if url.startswith("postgresql"):
        return create_engine(
            url,
            connect_args=postgres_connect_args(url, settings, "-c default_transaction_read_only=on"),
            # one round trip a query: no BEGIN before it, no ROLLBACK back in the pool
            isolation_level="AUTOCOMMIT",
            pool_recycle=1800,
            **pool,
        )
    raise RegistryNotReadable(f"{url!r}: not a SQLite, PostgreSQL or butler: registry URL")


def require_tables(engine: Engine, names: tuple[str, ...]) -> None:
    """RegistryNotReadable naming the tables ``engine``'s database lacks (an older schema)."""
    with engine.connect() as conn:
        have = set(inspect(conn).get_table_names())
    missing = [n for n in names if n not in have]
    if missing:
        where = engine.url.render_as_string(hide_password=True)
        raise RegistryNotReadable(
            f"registry {where} has no table(s) {', '.join(missing)}: its schema is older than "
            "this reader (run `obsingest registry migrate` against it first)"
        )
