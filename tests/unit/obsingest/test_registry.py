from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from obsingest.dataid import DataId
from obsingest.registry import FileRecord, Registry, tables
from obsingest.registry.migrations import LATEST, current_version
from obsingest.settings import RegistrySettings
from tests.contracts.registry import RegistryContract

pytestmark = pytest.mark.unit

DID = DataId("LSSTComCam", 2026112200001, 4)


@pytest.fixture
def registry(tmp_path):
    reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
    yield reg
    reg.close()


def _file(checksum="crc32c:0000abcd", uri="file:///a", size=100):
    return FileRecord(DID, uri, size, checksum, readout_time=datetime(2026, 11, 22, tzinfo=UTC))


class TestSqliteRegistryContract(RegistryContract):
    """The Registry contract on the embedded default (SQLite, WAL)."""

    @pytest.fixture
    def registry(self, registry):
        return registry


def test_migrations_are_versioned_and_idempotent(tmp_path):
    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'm.sqlite3'}")
    Registry.open(settings).close()
    reg = Registry.open(settings)
    with reg.engine.connect() as conn:
        assert current_version(conn) == LATEST
        assert (
            conn.execute(select(func.count()).select_from(tables.schema_version)).scalar() == LATEST
        )
        assert (
            conn.execute(select(func.count()).select_from(tables.detector)).scalar() == 189 + 9 + 1
        )
    reg.close()


def test_transient_operational_errors_are_retried(registry, monkeypatch):
    from sqlalchemy.exc import OperationalError

    calls = {"n": 0}
    original = registry._register

    def flaky(conn, record, exposure):
        calls["n"] += 1
        if calls["n"] < 3:
            raise OperationalError("INSERT", {}, Exception("server closed the connection"))
        return original(conn, record, exposure)

    monkeypatch.setattr(registry, "_register", flaky)
    assert registry.register(_file()).created
    assert calls["n"] == 3


def test_persistent_failure_becomes_registry_unavailable(registry, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from obsingest.registry import RegistryUnavailable

    def down(conn, record, exposure):
        raise OperationalError("INSERT", {}, Exception("connection slots are reserved"))

    monkeypatch.setattr(registry, "_register", down)
    with pytest.raises(RegistryUnavailable) as info:
        registry.register(_file())
    assert info.value.retriable


def test_retries_stop_at_the_deadline_not_only_the_attempt_count(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from obsingest.registry import RegistryUnavailable

    settings = RegistrySettings(
        url=f"sqlite:///{tmp_path / 'd.sqlite3'}",
        retry_attempts=50,
        retry_base_delay=0.2,
        retry_deadline=0.05,
    )
    reg = Registry.open(settings)
    calls = {"n": 0}

    def down(conn, record, exposure):
        calls["n"] += 1
        raise OperationalError("INSERT", {}, Exception("connection slots are reserved"))

    monkeypatch.setattr(reg, "_register", down)
    with pytest.raises(RegistryUnavailable):
        reg.register(_file())
    reg.close()
    assert calls["n"] < 50
