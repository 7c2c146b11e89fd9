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
