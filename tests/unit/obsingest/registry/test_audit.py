"""Reconcile's registry queries: each an index lookup, not a scan of the whole history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.sql import executed, sqlite_plan

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def test_the_full_sweeps_window_query_searches_an_index(registry):
    """``stored_between`` runs at every full sweep (every 30 min) over a window of hours; the
    datastore records are never purged (~190,000 a night): a scan would grow with all history."""
    with executed(registry.engine) as seen:
        registry.audit.stored_between(T0, T0 + timedelta(hours=1), uri_prefix="gs://b/")
    [(sql, params)] = [(s, p) for s, p in seen if "datastore_record" in s]
    plan = sqlite_plan(registry.engine, sql, params)
    assert "SEARCH datastore_record USING INDEX" in plan and "SCAN datastore_record" not in plan, plan


def test_a_registry_made_before_the_index_gets_it_from_migration_9(registry):
    """A fresh database gets the index from its tables; one at version 8 from migration 9."""
    from sqlalchemy import delete, inspect

    from obsingest.registry import migrations, tables

    with registry.engine.begin() as conn:
        tables.DATASTORE_STORED_INDEX.drop(conn)
        conn.execute(delete(tables.schema_version).where(tables.schema_version.c.version >= 9))
    assert migrations.migrate(registry.engine) == migrations.LATEST - 8
    indexes = {ix["name"] for ix in inspect(registry.engine).get_indexes("datastore_record")}
    assert tables.DATASTORE_STORED_INDEX.name in indexes
