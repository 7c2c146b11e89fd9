from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from obsingest.dataid import DataId
from obsingest.registry import ExposureRecord, FileRecord, Registry, tables
from obsingest.registry.migrations import LATEST, current_version
from obsingest.settings import RegistrySettings
from tests.contracts.registry import RegistryContract

pytestmark = pytest.mark.unit

DID = DataId("LSSTComCam", 2026112200001, 4)


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
        assert conn.execute(select(func.count()).select_from(tables.schema_version)).scalar() == LATEST
        assert conn.execute(select(func.count()).select_from(tables.detector)).scalar() == 205 + 9 + 1
    reg.close()


def test_a_current_schema_is_one_look_at_its_version(tmp_path):
    from sqlalchemy import event

    from obsingest.registry import migrations

    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'm.sqlite3'}")
    Registry.open(settings).close()
    reg = Registry.open(settings, migrate_schema=False)
    statements: list[str] = []
    event.listen(reg.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    assert migrations.migrate(reg.engine) == 0
    reg.close()
    assert not any("pg_advisory" in s or s.lstrip().upper().startswith("CREATE") for s in statements)
    assert len(statements) <= 3, statements  # the version table's presence, then its version


def test_migrations_upgrade_a_version_2_registry_in_place(tmp_path):
    """A registry made before the Butler's dimension data (v2: 189 LSSTCam detectors, no names,
    narrow exposure table) keeps its datasets and gains the columns and the corner rafts."""
    import sqlite3

    from obsingest.registry import migrations

    path = tmp_path / "old.sqlite3"
    settings = RegistrySettings(url=f"sqlite:///{path}")
    reg = Registry.open(settings, migrate_schema=False)
    with reg.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE obsingest_schema_version (version INTEGER PRIMARY KEY, "
            "description VARCHAR(200) NOT NULL, applied_at DATETIME NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE instrument (name VARCHAR(32) PRIMARY KEY, detector_max INTEGER NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE detector (instrument VARCHAR(32) REFERENCES "
            "instrument(name), id INTEGER, PRIMARY KEY (instrument, id))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE exposure (instrument VARCHAR(32), id BIGINT, "
            "day_obs INTEGER NOT NULL, obs_start DATETIME, exposure_time FLOAT, "
            "physical_filter VARCHAR(64), PRIMARY KEY (instrument, id))"
        )
        conn.exec_driver_sql("INSERT INTO instrument VALUES ('LSSTCam', 189)")
        for i in range(189):
            conn.exec_driver_sql(f"INSERT INTO detector VALUES ('LSSTCam', {i})")
        conn.exec_driver_sql(
            "INSERT INTO exposure VALUES ('LSSTCam', 2026112200001, 20261122, NULL, 15.0, 'r')"
        )
        for version in (1, 2):
            conn.exec_driver_sql(
                f"INSERT INTO obsingest_schema_version VALUES ({version}, 'old', '2026-01-01')"
            )
    # the rest of v1's tables exist in a real v2 registry
    tables.metadata.create_all(reg.engine, checkfirst=True)
    reg.close()
    applied = migrations.migrate(Registry.open(settings, migrate_schema=False).engine)
    assert applied == migrations.LATEST - 2  # 3 and every one since
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM detector WHERE instrument='LSSTCam'").fetchone() == (205,)
    assert db.execute(
        "SELECT full_name, raft, name_in_raft, purpose FROM detector WHERE id = 191 "
        "AND instrument = 'LSSTCam'"
    ).fetchone() == ("R00_SW0", "R00", "SW0", "WAVEFRONT")
    assert db.execute("SELECT class_name, detector_max FROM instrument WHERE name='LSSTCam'").fetchone() == (
        "lsst.obs.lsst.LsstCam",
        1000,
    )
    assert db.execute("SELECT exposure_time, obs_id FROM exposure").fetchone() == (15.0, None)
    db.close()
    reg = Registry.open(settings)  # and it is usable: a full exposure record fills the new fields
    reg.upsert_exposure(ExposureRecord("LSSTCam", 2026112200001, 20261122, obs_id="MC_O_20261122_000001"))
    with reg.engine.connect() as conn:
        row = conn.execute(select(tables.exposure)).mappings().one()
    assert (row["obs_id"], row["exposure_time"], row["physical_filter"]) == (
        "MC_O_20261122_000001",
        15.0,
        "r",
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


def test_dimension_rows_gone_under_a_process_that_wrote_them_are_written_again(registry):
    """The process skips the run and exposure rows it committed; a database restored from a
    backup taken before them refused the next CCD's dataset (a foreign key) as unstorable input:
    quarantined, with nothing left to retry it. The rows are written again instead."""
    from dataclasses import replace

    from sqlalchemy import delete

    from obsingest.registry.facility_tables import arrival_outbox

    assert registry.register(_file()).created
    with registry.engine.begin() as conn:  # the restore: nothing of the run or exposure is left
        for table in (arrival_outbox, tables.datastore_record, tables.dataset, tables.exposure, tables.run):
            conn.execute(delete(table))
    other = replace(_file(uri="file:///b"), data_id=replace(DID, detector=5))
    assert registry.register(other).created
    assert registry.count_datasets() == 1 and registry.exposure(DID.instrument, DID.exposure)


def test_a_configured_dataset_type_is_registered_with_its_first_dataset(tmp_path):
    """``OBSINGEST_REGISTRY_DATASET_TYPE`` other than ``raw``: only ``raw`` was seeded, so every
    CCD broke the dataset's foreign key and was quarantined as unstorable input."""
    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}", dataset_type="raw_sim")
    registry = Registry.open(settings)
    try:
        registration = registry.register(_file())
        assert registration.created and registration.dataset_type == "raw_sim"
        assert registry.datasets()[0]["dataset_type"] == "raw_sim"
    finally:
        registry.close()


def test_the_listings_fetch_their_rows_in_batches(registry):
    """``registry list`` read every row into one list (and psycopg2's client-side cursor held the
    whole result besides): ~640 MB for a night's 190,000 CCDs, growing with history. The listings
    are now generators whose statement runs with ``stream_results``/``yield_per`` (a server-side
    cursor on PostgreSQL), rows fetched a batch at a time."""
    from sqlalchemy import event

    from obsingest.registry import QuarantineEntry

    assert registry.register(_file()).created
    registry.quarantine(QuarantineEntry("file:///bad", "corrupt-file", "truncated", "crc32c:1", DID, 5))
    options = []

    def record(conn, cursor, statement, parameters, context, many):
        if statement.lstrip().startswith("SELECT"):
            options.append(context.execution_options)

    event.listen(registry.engine, "before_cursor_execute", record)
    for listing in (registry.iter_datasets(), registry.iter_quarantined()):
        assert not options  # nothing is read before the first row is asked for
        [row] = listing
        assert row.get("uri") == "file:///a" or row.get("reason") == "corrupt-file"
        [used] = options
        assert used["stream_results"] and used["yield_per"] > 1
        options.clear()
    assert registry.datasets() == list(registry.iter_datasets())
