import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from obsingest.dataid import DataId, dataset_id
from obsingest.errors import ChecksumConflict
from obsingest.registry import ExposureRecord, FileRecord, QuarantineEntry, Registry, tables
from obsingest.registry.migrations import LATEST, current_version
from obsingest.settings import RegistrySettings

pytestmark = pytest.mark.unit

DID = DataId("LSSTComCam", 2026112200001, 4)


@pytest.fixture
def registry(tmp_path):
    reg = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
    yield reg
    reg.close()


def _file(checksum="crc32c:0000abcd", uri="file:///a", size=100):
    return FileRecord(DID, uri, size, checksum, readout_time=datetime(2026, 11, 22, tzinfo=UTC))


def test_register_then_redeliver_is_a_noop_returning_the_same_dataset(registry):
    first = registry.register(_file())
    second = registry.register(_file(uri="file:///elsewhere"))
    assert first.created and not second.created
    assert first.dataset_id == second.dataset_id == dataset_id(DID, "raw", "LSSTComCam/raw/all")
    assert second.uri == "file:///a"
    assert second.registered_time == first.registered_time
    assert registry.count_datasets() == 1


def test_same_data_id_different_bytes_is_a_conflict_and_nothing_is_overwritten(registry):
    registry.register(_file())
    with pytest.raises(ChecksumConflict, match="refusing file:///b"):
        registry.register(_file(checksum="crc32c:00000bad", uri="file:///b"))
    [row] = registry.datasets()
    assert row["checksum"] == "crc32c:0000abcd" and row["uri"] == "file:///a"


def test_concurrent_duplicate_registrations_give_exactly_one_row(registry):
    barrier = threading.Barrier(8)

    def go(_):
        barrier.wait()
        return registry.register(_file())

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(go, range(8)))
    assert sum(r.created for r in results) == 1
    assert len({r.dataset_id for r in results}) == 1
    with registry.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.datastore_record)).scalar() == 1


def test_exposure_upsert_fills_unknown_fields_only(registry):
    registry.register(_file())  # creates the exposure with only its id
    registry.upsert_exposure(
        ExposureRecord("LSSTComCam", DID.exposure, DID.day_obs, None, 15.0, "r")
    )
    registry.upsert_exposure(
        ExposureRecord("LSSTComCam", DID.exposure, DID.day_obs, None, 99.0, "g")
    )
    with registry.engine.connect() as conn:
        row = conn.execute(select(tables.exposure)).mappings().one()
    assert (row["exposure_time"], row["physical_filter"]) == (15.0, "r")


def test_quarantine_counts_repeats_once(registry):
    entry = QuarantineEntry("file:///bad", "corrupt-file", "truncated", "crc32c:1", DID, 5)
    registry.quarantine(entry)
    registry.quarantine(entry)
    registry.quarantine(QuarantineEntry("file:///bad", "header-mismatch", "other", "crc32c:1"))
    rows = registry.quarantined()
    assert [(r["reason"], r["occurrences"]) for r in rows] == [
        ("corrupt-file", 2),
        ("header-mismatch", 1),
    ]
    assert rows[0]["detector"] == 4


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
