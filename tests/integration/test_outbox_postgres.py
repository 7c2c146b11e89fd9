"""The arrivals outbox and canary log on PostgreSQL: the same contract as on SQLite, with real
concurrent drains (``FOR UPDATE SKIP LOCKED`` claims) and a fresh database per test."""

from __future__ import annotations

import pytest

from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
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
