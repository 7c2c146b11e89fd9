"""The arrivals outbox and canary log on the embedded default (SQLite)."""

from __future__ import annotations

import pytest

from obsingest.registry import Registry
from obsingest.registry.migrations import LATEST
from obsingest.settings import RegistrySettings
from tests.fixtures.sql import executed, sqlite_plan
from tests.unit.obsingest.registry.outbox_contract import OutboxContract

pytestmark = pytest.mark.unit


class TestSqliteOutbox(OutboxContract):
    @pytest.fixture
    def registry(self, tmp_path):
        reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
        yield reg
        reg.close()


def test_an_existing_registry_gains_the_outbox_by_migration(tmp_path):
    """A registry made before migration 3 (its tables only) is brought up to date."""
    from sqlalchemy import inspect

    from obsingest.registry import migrations

    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'old.sqlite3'}")
    old = Registry.open(settings, migrate_schema=False)
    saved = migrations.MIGRATIONS
    try:
        migrations.MIGRATIONS = tuple(m for m in saved if m.version < 3)
        migrations.migrate(old.engine)
    finally:
        migrations.MIGRATIONS = saved
    assert not inspect(old.engine).has_table("arrival_outbox")
    assert migrations.migrate(old.engine) >= 1
    assert inspect(old.engine).has_table("arrival_outbox")
    assert inspect(old.engine).has_table("canary")
    with old.engine.connect() as conn:
        assert migrations.current_version(conn) == LATEST
    old.close()


def _plan(registry, run) -> str:
    """SQLite's plan of the outbox statement ``run`` executes."""
    with executed(registry.engine) as seen:
        run()
    [(sql, params)] = [(s, p) for s, p in seen if "arrival_outbox" in s]
    return sqlite_plan(registry.engine, sql, params)


def test_a_claim_reads_the_pending_rows_in_order_from_an_index_not_all_of_them_sorted(tmp_path):
    """A drain's claim of 100 sorted every pending row by (attempts, id) (64 ms at 100,000, for
    each claim of a backlog after an outage); migration 10's partial index gives them in order."""
    reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
    try:
        plan = _plan(reg, lambda: reg.outbox.claim(limit=100))
    finally:
        reg.close()
    assert "USING INDEX ix_arrival_outbox_pending" in plan and "TEMP B-TREE" not in plan, plan


def test_a_registry_made_before_the_pending_index_gets_it_from_migration_10(tmp_path):
    from sqlalchemy import delete, inspect

    from obsingest.registry import migrations, tables
    from obsingest.registry.facility_tables import OUTBOX_PENDING_INDEX

    reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
    try:
        with reg.engine.begin() as conn:
            OUTBOX_PENDING_INDEX.drop(conn)
            conn.execute(delete(tables.schema_version).where(tables.schema_version.c.version == 10))
        assert migrations.migrate(reg.engine) == 1
        indexes = {ix["name"] for ix in inspect(reg.engine).get_indexes("arrival_outbox")}
        assert OUTBOX_PENDING_INDEX.name in indexes
    finally:
        reg.close()
