"""The arrivals outbox and canary log on the embedded default (SQLite)."""

from __future__ import annotations

import pytest

from obsingest.registry import Registry
from obsingest.registry.migrations import LATEST
from obsingest.settings import RegistrySettings
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
