"""The registry on a real PostgreSQL: idempotency under concurrency, bounded pool, recovery."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from obsingest.dataid import DataId
from obsingest.registry import ExposureRecord, FileRecord, Registry, RegistryUnavailable
from obsingest.registry import engine as engine_module
from obsingest.registry import open_registry as open_any
from obsingest.registry.butler_repo import make_repo
from obsingest.registry.migrations import LATEST
from obsingest.settings import RegistrySettings
from tests.contracts.registry import RegistryContract
from tests.integration.fixtures.butler import small_raw
from tests.integration.fixtures.handles import PostgresServer

pytestmark = pytest.mark.integration

DID = DataId("LSSTComCam", 2026112200007, 3)


def record(data_id: DataId = DID, checksum: str = "crc32c:0000abcd", size: int = 100) -> FileRecord:
    return FileRecord(data_id=data_id, uri=f"gs://b/{data_id.object_name()}", size=size, checksum=checksum)


def conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def open_registry(url: str, **settings: Any) -> Registry:
    return Registry.open(RegistrySettings(url=url, **settings))


# -- helpers run in other processes (module level: picklable under spawn) -------------------------
def _register_many(url: str, threads: int) -> list[tuple[str, bool]]:
    registry = open_registry(url, pool_size=4)
    try:
        with ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(lambda _: registry.register(record()), range(threads)))
        return [(str(r.dataset_id), r.created) for r in results]
    finally:
        registry.close()


def _migrate(url: str, barrier: Any) -> int:
    barrier.wait(timeout=60)
    registry = open_registry(url)
    try:
        return registry.count_datasets()
    finally:
        registry.close()


# -- tests ------------------------------------------------------------------------------------
class TestPostgresRegistryContract(RegistryContract):
    """The Registry contract on a real PostgreSQL (a fresh database per test)."""

    @pytest.fixture
    def registry(self, postgres: str) -> Iterator[Registry]:
        registry = open_registry(postgres)
        yield registry
        registry.close()


def test_round_trip_keeps_the_exposure_record(postgres: str) -> None:
    registry = open_registry(postgres)
    try:
        exposure = ExposureRecord("LSSTComCam", DID.exposure, DID.day_obs, exposure_time=15.0)
        first = registry.register(record(), exposure)
        assert first.created
        held = registry.exposure("LSSTComCam", DID.exposure)
        assert held is not None and held["exposure_time"] == 15.0
    finally:
        registry.close()


def test_concurrent_duplicate_deliveries_from_threads_and_processes_give_one_row(postgres: str) -> None:
    ctx = get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx) as procs:
        remote = [procs.submit(_register_many, postgres, 8) for _ in range(2)]
        local = _register_many(postgres, 16)
        results = local + [r for f in remote for r in f.result(timeout=120)]
    assert len(results) == 32
    assert len({dataset_id for dataset_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    registry = open_registry(postgres)
    try:
        assert registry.count_datasets() == 1
    finally:
        registry.close()


def _backends(url: str) -> int:
    database = make_url(url).database
    admin = make_url(url).set(database="postgres")
    with psycopg.connect(conninfo(admin.render_as_string(hide_password=False))) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()
    return int(row[0]) if row else 0


def test_pool_stays_bounded_under_fifty_concurrent_registrations(postgres: str) -> None:
    registry = open_registry(postgres, pool_size=2, max_overflow=0, pool_timeout=60)
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _backends(postgres))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        ids = [DataId("LSSTCam", 2026112200008, d) for d in range(50)]
        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(lambda d: registry.register(record(d)), ids))
    finally:
        stop.set()
        watcher.join()
    try:
        assert all(r.created for r in results)
        assert registry.count_datasets() == 50
        assert 1 <= peak <= 2, peak
    finally:
        registry.close()


def test_a_connection_killed_mid_transaction_is_recovered_by_retry(postgres: str) -> None:
    registry = open_registry(postgres, retry_base_delay=0.01)
    killed: list[int] = []

    @event.listens_for(registry.engine, "before_cursor_execute")
    def kill_first_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if killed or not statement.startswith("INSERT INTO dataset "):
            return
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with psycopg.connect(conninfo(postgres), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        killed.append(pid)

    try:
        result = registry.register(record())
        assert killed, "the hook never fired: the test did not kill anything"
        assert result.created
        assert registry.count_datasets() == 1
        # and the registry keeps working on a fresh connection
        assert not registry.register(record()).created
    finally:
        registry.close()


def test_pooled_connections_closed_by_the_server_are_replaced(postgres: str) -> None:
    """ "server closed the connection": idle pooled connections killed between two calls."""
    registry = open_registry(postgres, pool_size=2, retry_base_delay=0.01)
    try:
        registry.register(record())
        database = make_url(postgres).database
        with psycopg.connect(conninfo(postgres), autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        assert not registry.register(record()).created
        assert registry.register(record(DataId("LSSTComCam", DID.exposure, 4))).created
    finally:
        registry.close()


def test_a_pool_of_stale_connections_is_replaced_in_one_attempt_on_the_one_statement_path(
    postgres: str,
) -> None:
    """After a server restart every pooled connection is stale. The one-statement register path
    (``prepared.autocommit_rows``) replaced one per attempt, each after a backoff: a pool larger
    than the retry attempts failed the registration (RegistryUnavailable). Now one attempt."""
    from tests.unit.obsingest.registry.outbox_contract import announce

    registry = open_registry(postgres, pool_size=4, retry_attempts=2, retry_base_delay=0.01)
    try:
        registry.register(record(), announce=announce)  # the dimension rows: the full path
        registry.register(record(DataId("LSSTComCam", DID.exposure, 4)), announce=announce)
        held = [registry.engine.connect() for _ in range(4)]
        for conn in held:
            conn.close()  # four live connections in the pool
        with psycopg.connect(conninfo(postgres), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (make_url(postgres).database,),
            )
        assert registry.register(record(DataId("LSSTComCam", DID.exposure, 5)), announce=announce).created
    finally:
        registry.close()


def test_migrations_from_two_processes_at_once(postgres: str) -> None:
    ctx = get_context("spawn")
    barrier = ctx.Manager().Barrier(2)
    with ProcessPoolExecutor(2, mp_context=ctx) as procs:
        futures = [procs.submit(_migrate, postgres, barrier) for _ in range(2)]
        counts = [f.result(timeout=120) for f in futures]
    assert counts == [0, 0]
    with psycopg.connect(conninfo(postgres)) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM obsingest_schema_version")]
        instruments = conn.execute("SELECT count(*) FROM instrument").fetchone()
    assert sorted(versions) == list(range(1, LATEST + 1))
    assert instruments is not None and instruments[0] == 3


def _in_thread(call: Any) -> tuple[threading.Thread, list[BaseException | None]]:
    """``call`` on a daemon thread; the list gets its error (None: it returned)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_register_behind_another_sessions_lock_gives_up_within_the_retry_deadline(postgres: str) -> None:
    """A session holding a lock (a migration, or a client that died in its transaction: the
    server keeps it for hours) hung every register call, and every group-commit follower behind
    it, with no bound: each Pub/Sub redelivery one more hung thread. The wait is now bounded by
    the retry deadline: RegistryUnavailable (503), and redelivery retries."""
    registry = open_registry(postgres, retry_deadline=1.0)
    holder = psycopg.connect(conninfo(postgres))
    try:
        registry.register(record())  # the dimension rows exist: only the dataset insert waits
        holder.execute("LOCK TABLE dataset IN ACCESS EXCLUSIVE MODE")
        thread, outcome = _in_thread(lambda: registry.register(record(DataId("LSSTComCam", DID.exposure, 4))))
        thread.join(timeout=30)
        assert not thread.is_alive(), "register still waiting for another session's lock"
        [error] = outcome
        assert isinstance(error, RegistryUnavailable), error
        holder.rollback()
        assert registry.register(record(DataId("LSSTComCam", DID.exposure, 4))).created
    finally:
        holder.close()
        registry.close()


class _Forwarder:
    """A private loopback port in front of PostgreSQL: a DROP rule on it makes the server vanish
    (no RST, nothing acknowledged) for this test's connections only."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


@contextlib.contextmanager
def _vanished(port: int) -> Iterator[None]:
    """Every packet to or from loopback ``port`` dropped (as root, with iptables)."""
    rules = [
        ["INPUT", "-i", "lo", "-p", "tcp", flag, str(port), "-j", "DROP"] for flag in ("--dport", "--sport")
    ]
    added = []
    try:
        for rule in rules:
            subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
            added.append(rule)
        yield
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], check=False, capture_output=True)


def test_a_server_that_vanishes_fails_a_register_in_seconds_not_minutes(
    postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server gone without a RST (host down, partition) hung a register call in the kernel's
    retransmissions (~15 min) and every caller queued behind it. libpq's connect_timeout,
    keepalives and tcp_user_timeout (shortened here) now end it: RegistryUnavailable."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        pytest.fail("needs root and iptables to drop a port's packets (infra/local/system-deps.sh)")
    monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, "connect_timeout", 2)
    monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, "keepalives_idle", 1)
    monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, "keepalives_interval", 1)
    monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, "tcp_user_timeout", 2000)
    url = make_url(postgres)
    forwarder = _Forwarder(url.host or "127.0.0.1", url.port or 5432)
    private = url.set(host="127.0.0.1", port=forwarder.port).render_as_string(hide_password=False)
    registry = open_registry(private, retry_deadline=1.0)
    try:
        registry.register(record())
        with _vanished(forwarder.port):
            thread, outcome = _in_thread(
                lambda: registry.register(record(DataId("LSSTComCam", DID.exposure, 4)))
            )
            thread.join(timeout=60)
            assert not thread.is_alive(), "register still waiting for a server that is gone"
        [error] = outcome
        assert isinstance(error, RegistryUnavailable), error
        assert registry.register(record(DataId("LSSTComCam", DID.exposure, 4))).created
    finally:
        registry.close()
        forwarder.close()


def test_a_migration_waits_for_another_processs_migration_however_long(postgres: str) -> None:
    """The bounded lock wait is for requests: a process starting while another migrates waits
    for it (here longer than its retry deadline), as before."""
    from obsingest.registry.migrations import _LOCK_KEY

    holder = psycopg.connect(conninfo(postgres), autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    release = threading.Timer(2.0, lambda: holder.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,)))
    release.start()
    try:
        registry = open_registry(postgres, retry_deadline=0.5)
        registry.close()
    finally:
        release.join()
        holder.close()


def test_a_butler_database_that_vanishes_fails_a_register_in_seconds_not_minutes(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """daf_butler builds its own engine for a repository's PostgreSQL registry, without libpq's
    bounds: that server gone without a RST hung a register in the Butler's ingest for the
    kernel's ~15 min. Its URL now carries POSTGRES_LIVENESS (shortened here): RegistryUnavailable."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        pytest.fail("needs root and iptables to drop a port's packets (infra/local/system-deps.sh)")
    for key, value in (("connect_timeout", 2), ("keepalives_idle", 1), ("keepalives_interval", 1)):
        monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, key, value)
    monkeypatch.setitem(engine_module.POSTGRES_LIVENESS, "tcp_user_timeout", 2000)
    butler_db, companion = (
        postgres_server.create_database("butler"),
        postgres_server.create_database("companion"),
    )
    forwarder = None
    try:
        with psycopg.connect(conninfo(butler_db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
        url = make_url(butler_db)
        forwarder = _Forwarder(url.host or "127.0.0.1", url.port or 5432)
        private = url.set(host="127.0.0.1", port=forwarder.port).render_as_string(hide_password=False)
        monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", companion)
        registry = open_any(RegistrySettings(url=make_repo(tmp_path / "repo", registry_db=private)))
        raws = {d: DataId("LSSTCam", 2026112200001, d) for d in (0, 1)}
        records = {}
        for d, did in raws.items():
            (tmp_path / f"{d}.fits").write_bytes(small_raw(did.exposure, d))
            records[d] = FileRecord(did, (tmp_path / f"{d}.fits").as_uri(), 1, "crc32c:0000abcd")
        try:
            registry.register(records[0])
            with _vanished(forwarder.port):
                thread, outcome = _in_thread(lambda: registry.register(records[1]))
                thread.join(timeout=60)
                assert not thread.is_alive(), "register still waiting for a Butler database that is gone"
            [error] = outcome
            assert isinstance(error, RegistryUnavailable), error
            assert registry.register(records[1]).created
        finally:
            registry.close()
    finally:
        if forwarder is not None:
            forwarder.close()
        for db in (butler_db, companion):
            postgres_server.drop_database(db)
