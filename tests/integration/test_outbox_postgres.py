"""The arrivals outbox and canary log on PostgreSQL: the same contract as on SQLite, with real
concurrent drains (``FOR UPDATE SKIP LOCKED`` claims) and a fresh database per test."""

from __future__ import annotations

from typing import Any

import pytest

from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from tests.fixtures.sql import executed
from tests.unit.obsingest.registry.outbox_contract import OutboxContract

pytestmark = pytest.mark.integration


class TestPostgresOutbox(OutboxContract):
    @pytest.fixture
    def registry(self, postgres: str):
        reg = Registry.open(RegistrySettings(url=postgres, pool_size=4))
        yield reg
        reg.close()


def test_mark_published_skips_its_own_wal_flush_but_leaves_every_other_commit_synchronous(
    postgres: str,
) -> None:
    """The mark commits without waiting for fsync (a lost mark is only a re-publish); the
    setting must not leak into the pooled session, where registrations commit next."""
    from sqlalchemy import create_engine, text

    from tests.unit.obsingest.registry.outbox_contract import announce, file_record

    # The test cluster may run with synchronous_commit off server-wide (throwaway fixtures start
    # it non-durable): make it on for this database, so a leaked "off" is visible.
    admin = create_engine(postgres, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        name = conn.execute(text("SELECT current_database()")).scalar_one()
        conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = on'))
    admin.dispose()

    reg = Registry.open(RegistrySettings(url=postgres, pool_size=1, max_overflow=0))
    try:
        registration = reg.register(file_record(1), announce=announce)
        assert registration.outbox_id is not None
        reg.outbox.mark_published([registration.outbox_id])
        assert reg.outbox.status().pending == 0
        with reg.engine.connect() as conn:  # the one pooled connection the mark used
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == "on"
        with reg.engine.begin() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == "on"
    finally:
        reg.close()


def test_a_registration_after_the_first_of_its_exposure_is_one_statement_with_the_same_rows(
    postgres: str,
) -> None:
    """Once the run and exposure rows are committed, PostgreSQL registers a dataset, its
    datastore record and its outbox row in one autocommit statement: the same rows as the
    transaction writes, the pool's connections left as they were, a redelivery a duplicate
    and different bytes a ChecksumConflict that overwrites nothing."""
    import dataclasses

    from sqlalchemy import event, text

    from obsingest.errors import ChecksumConflict
    from tests.unit.obsingest.registry.outbox_contract import announce, file_record

    reg = Registry.open(RegistrySettings(url=postgres, pool_size=1, max_overflow=0))
    statements: list[str] = []
    event.listen(reg.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        first = reg.register(file_record(1), announce=announce)  # writes the dimension rows
        statements.clear()
        second = reg.register(file_record(2), announce=announce)
        assert statements == []  # not through SQLAlchemy: the driver's one statement
        assert second.created and second.outbox_id is not None
        assert second.outbox_id != first.outbox_id
        row = reg.outbox.row(second.dataset_id)
        assert row is not None and row["id"] == second.outbox_id
        assert row["payload"] == announce(second).payload and row["published_at"] is None
        assert row["lease_until"] is not None and row["attempts"] == 0
        [stored] = [d for d in reg.datasets() if d["detector"] == 2]
        assert (stored["uri"], stored["size"], stored["checksum"]) == ("gs://b/raw/2", 100, "crc32c:00000002")
        with reg.engine.connect() as conn:  # back in the pool as it came: not autocommit
            driver = conn.connection.driver_connection
            assert driver is not None and driver.autocommit is False
            assert conn.execute(text("SELECT count(*) FROM arrival_outbox")).scalar_one() == 2

        again = reg.register(file_record(2), announce=announce)
        assert not again.created and again.dataset_id == second.dataset_id
        assert again.registered_time == second.registered_time
        other = dataclasses.replace(file_record(2), checksum="crc32c:ffffffff")
        with pytest.raises(ChecksumConflict):
            reg.register(other, announce=announce)
        [kept] = [d for d in reg.datasets() if d["detector"] == 2]
        assert kept["checksum"] == "crc32c:00000002"
        assert reg.outbox.status().pending == 2
    finally:
        reg.close()


def _fill(reg: Registry, rows: int, published: str = "NULL") -> None:
    """``rows`` outbox rows (``published``: their published_at, SQL), then ANALYZE; 600 bytes of
    payload each, an ArrivalEvent's size, so the planner sees a table of a real row width."""
    from sqlalchemy import text

    with reg.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO arrival_outbox (dataset_id, topic, attributes, payload, created_at, "
                "attempts, last_error, published_at) SELECT gen_random_uuid(), 'ccd-arrivals', '{}', "
                f"decode(repeat('00', 600), 'hex'), now(), 0, '', {published} FROM generate_series(1, :n)"
            ),
            {"n": rows},
        )
    with reg.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE arrival_outbox"))


def _statement(reg: Registry, run) -> tuple[str, Any]:
    """The outbox statement ``run`` executes, with its parameters."""
    with executed(reg.engine) as seen:
        run()
    [found] = [(s, p) for s, p in seen if "arrival_outbox" in s]
    return found


def _rows_read(reg: Registry, sql: str, params: Any, commit: bool = False) -> int:
    """How many rows PostgreSQL's scans of arrival_outbox read to run ``sql`` (EXPLAIN ANALYZE:
    it runs; rolled back unless ``commit``)."""
    total = 0

    def walk(node: dict) -> None:
        nonlocal total
        if "Scan" in node["Node Type"] and node.get("Relation Name") == "arrival_outbox":
            loops = node["Actual Loops"]
            total += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * loops
        for child in node.get("Plans", []):
            walk(child)

    with reg.engine.connect() as conn:
        [[plan]] = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).all()
        if commit:
            conn.commit()
        else:
            conn.rollback()
    walk(plan[0]["Plan"])
    return total


def test_a_claim_reads_about_its_limit_of_rows_not_every_pending_row(postgres: str) -> None:
    """A drain's claim of 100 read and sorted every pending row (64 ms at 100,000, for each claim
    of a backlog after an outage); migration 10's partial index gives them in (attempts, id) order."""
    reg = Registry.open(RegistrySettings(url=postgres))
    try:
        _fill(reg, 100_000)
        sql, params = _statement(reg, lambda: reg.outbox.claim(limit=100))
        read = _rows_read(reg, sql, params)
    finally:
        reg.close()
    assert read <= 1_000, read


def test_a_purge_reads_about_the_rows_it_deletes_not_the_rows_it_keeps(postgres: str) -> None:
    """The purge took each batch in id order: PostgreSQL read every row still past the retention
    and sorted them, for each batch of 1,000 (20,000 read for 5,000 here; for a day of rows after
    the facility was down, ~190,000, some 18 million). In published order it reads the batch."""
    from datetime import timedelta

    from sqlalchemy import text

    reg = Registry.open(RegistrySettings(url=postgres))
    try:
        sql, params = _statement(reg, lambda: reg.outbox.purge(timedelta(days=7), batch=1000))
        _fill(reg, 5_000, published="now() - interval '30 days'")
        _fill(reg, 100_000, published="now()")
        read = sum(_rows_read(reg, sql, params, commit=True) for _ in range(6))
        with reg.engine.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM arrival_outbox")).scalar_one()
    finally:
        reg.close()
    assert left == 100_000
    assert read <= 2 * 5_000, read
