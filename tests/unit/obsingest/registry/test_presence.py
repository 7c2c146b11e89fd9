"""Presence queries on SQLite, against rows written by the real write path: CCDs by data id and
dataset id, exposure answers (expected, missing, latencies, status), night pages, answers kept
current as CCDs arrive, inputs refused with what is wrong, and a reader that cannot write."""

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from obsingest.dataid import DataId, dataset_id
from obsingest.registry import Registry
from obsingest.registry.engine import RegistryNotReadable
from obsingest.registry.manifests import record_manifest
from obsingest.registry.presence import PresenceReader, QueryRefused
from obsingest.settings import RegistrySettings
from tests.unit.obsingest.registry.conftest import DAY_OBS, E1, E2, E3, manifest, newest_and_its_sql, register

pytestmark = pytest.mark.unit


@pytest.fixture
def reader(night):
    url, _ = night
    r = PresenceReader.open(RegistrySettings(url=url), budget_seconds=5.0)
    yield r
    r.close()


def _latencies(registry, exposure):
    rows = registry.datasets("LSSTComCam", exposure)
    return {
        r["detector"]: (
            datetime.fromisoformat(r["ingest_time"]) - datetime.fromisoformat(r["readout_time"])
        ).total_seconds()
        for r in rows
    }


def test_a_registered_ccd_by_data_id_and_by_dataset_id(night, reader):
    _, registry = night
    ccd = reader.ccd("LSSTComCam", E2, 3)
    assert ccd.registered and ccd.run == "LSSTComCam/raw/all" and ccd.dataset_type == "raw"
    assert ccd.dataset_id == str(dataset_id(DataId("LSSTComCam", E2, 3), "raw", ccd.run))
    assert ccd.uri == f"file:///store/{E2}/3.fits.fz" and ccd.size == 103
    assert ccd.latency_seconds == pytest.approx(_latencies(registry, E2)[3], abs=1e-6)
    assert ccd.over_budget is True and ccd.day_obs == DAY_OBS
    assert reader.dataset(uuid.UUID(ccd.dataset_id)) == ccd


def test_a_ccd_not_registered_is_an_answer_not_an_error(reader):
    ccd = reader.ccd("LSSTComCam", E2, 8)
    assert not ccd.registered and ccd.dataset_id is None and ccd.latency_seconds is None
    assert reader.dataset(uuid.uuid4()) is None


def test_an_exposure_against_its_manifest(night, reader):
    _, registry = night
    e = reader.exposure("LSSTComCam", E2)
    assert (e.expected, e.expected_source, e.registered, e.missing) == (9, "manifest", 7, (7, 8))
    assert e.status == "incomplete" and e.over_budget == (3,)
    lat = sorted(_latencies(registry, E2).values())
    assert e.latency_max == pytest.approx(lat[-1], abs=1e-6)
    assert e.latency_p50 == pytest.approx(lat[3], abs=1e-6)
    assert e.physical_filter == "r_03" and e.exposure_time == 15.0
    assert e.first_readout < e.last_registered


def test_complete_on_time_and_over_budget_without_manifest(reader):
    assert reader.exposure("LSSTComCam", E1).status == "complete"
    e3 = reader.exposure("LSSTComCam", E3)
    assert (e3.status, e3.over_budget, e3.expected_source) == ("over_budget", (8,), "instrument")
    assert "no manifest recorded" in e3.note
    assert reader.exposure("LSSTComCam", E3 + 10) is None
    assert reader.exposure("LATISS", E1) is None


def test_a_night_is_listed_page_by_page_each_exposure_once(reader):
    first = reader.night("LSSTComCam", DAY_OBS, limit=2)
    assert [e.exposure for e in first.exposures] == [E1, E2] and first.next_after == E2
    rest = reader.night("LSSTComCam", DAY_OBS, limit=2, after=first.next_after)
    assert [e.exposure for e in rest.exposures] == [E3] and rest.next_after is None
    assert reader.night("LSSTComCam", DAY_OBS + 1).exposures == []
    assert [e.exposure for e in reader.latest(2)] == [E3, E2]


def test_the_newest_exposures_are_read_from_each_key_not_from_all_history(night, reader):
    """``obsingest status`` asks for the newest exposures at every refresh: it read, merged and
    sorted every exposure and manifest ever recorded (a scan growing with every night). Now the
    newest of each instrument and table by its key, merged across instruments."""
    _, registry = night
    record_manifest(registry, manifest(E3 + 1, [0], instrument="LATISS", flt="SDSSr_65mm~empty"))
    newest, (sql, params) = newest_and_its_sql(reader, 3)
    assert [(e.instrument, e.exposure) for e in newest] == [
        ("LATISS", E3 + 1),
        ("LSSTComCam", E3),
        ("LSSTComCam", E2),
    ]
    with reader.engine.connect() as conn:
        plan = " ".join(str(tuple(r)) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
    assert "SEARCH exposure USING" in plan and "SEARCH exposure_manifest USING" in plan, plan
    assert not re.search(r"SCAN (exposure|exposure_manifest)\b", plan), plan


def test_a_night_lists_its_offset_exposures_too(night, reader):
    """A CCS exposure before 2023-10-05 has the year raised by 1000 (obs_lsst's offset): it is
    of its own night, listed after the OCS's exposures, and its CCDs say their day."""
    _, registry = night
    day, ocs, ccs = 20230901, 2023090100005, 3023090100078
    register(registry, ocs, 0, 1.0)
    register(registry, ccs, 0, 1.0)
    page = reader.night("LSSTComCam", day)
    assert [e.exposure for e in page.exposures] == [ocs, ccs]
    assert [e.exposure for e in reader.night("LSSTComCam", day, after=ocs).exposures] == [ccs]
    first = reader.night("LSSTComCam", day, limit=1)
    assert [e.exposure for e in first.exposures] == [ocs] and first.next_after == ocs
    assert reader.ccd("LSSTComCam", ccs, 0).day_obs == day
    assert reader.exposure("LSSTComCam", ccs).day_obs == day
    with pytest.raises(QueryRefused, match="not a YYYYMMDD date"):
        reader.night("LSSTComCam", 30230901)  # the id's raised year is not a night


def test_answers_follow_new_registrations_and_manifests(night, reader):
    _, registry = night
    assert reader.exposure("LSSTComCam", E2).registered == 7  # cached now
    register(registry, E2, 7, 1.0)
    register(registry, E2, 8, 1.0)
    e = reader.exposure("LSSTComCam", E2)
    assert e.registered == 9 and e.missing == () and e.status == "over_budget"
    assert reader.exposure("LSSTComCam", E3).expected_source == "instrument"
    record_manifest(registry, manifest(E3, [0, 1, 2, 3, 4, 5, 6, 7]))
    e3 = reader.exposure("LSSTComCam", E3)
    assert e3.expected_source == "manifest" and e3.unexpected == (8,) and e3.expected == 8
    assert [x.registered for x in reader.night("LSSTComCam", DAY_OBS).exposures] == [9, 9, 9]


@pytest.mark.parametrize(
    ("call", "reason", "status", "words"),
    [
        (lambda r: r.ccd("HSC", E1, 0), "unknown-instrument", 404, "unknown instrument 'HSC'"),
        (lambda r: r.ccd("LSSTComCam\u00e9", E1, 0), "unknown-instrument", 404, "\\xe9"),
        (lambda r: r.ccd("LSSTComCam", E1, 9), "unknown-detector", 404, "no detector 9 (ids 0..8)"),
        (lambda r: r.ccd("LSSTComCam", 5, 0), "bad-exposure-id", 404, "day_obs 0 is not"),
        (lambda r: r.ccd("LSSTComCam", 2**70, 0), "bad-exposure-id", 400, "64-bit"),
        (lambda r: r.exposure("LSSTComCam", 0), "bad-exposure-id", 400, "positive"),
        (lambda r: r.night("LSSTComCam", 20261340), "bad-day-obs", 404, "not a YYYYMMDD date"),
    ],
)
def test_questions_that_cannot_be_answered_say_why(reader, call, reason, status, words):
    with pytest.raises(QueryRefused) as e:
        call(reader)
    assert (e.value.reason, e.value.status) == (reason, status)
    assert words in str(e.value)


def test_the_reader_cannot_write(reader):
    with (
        pytest.raises(OperationalError, match=r"readonly|read-only|query_only"),
        reader.engine.begin() as conn,
    ):
        conn.execute(text("DELETE FROM exposure_manifest"))
    assert reader.exposure("LSSTComCam", E1).expected == 9


def test_a_registry_older_than_the_reader_is_named_not_guessed(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    Registry.open(RegistrySettings(url=url)).close()
    import sqlite3

    db = sqlite3.connect(tmp_path / "old.sqlite3")
    db.execute("DROP TABLE exposure_manifest")
    db.commit()
    db.close()
    with pytest.raises(RegistryNotReadable, match=r"no table\(s\) exposure_manifest"):
        PresenceReader.open(RegistrySettings(url=url), 5.0)
    with pytest.raises(RegistryNotReadable, match="no registry database at"):
        PresenceReader.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'none.sqlite3'}"), 5.0)


def test_quarantine_counts_by_reason_and_shows_the_latest(night, reader):
    from obsingest.registry import QuarantineEntry

    _, registry = night
    for uri, reason in (("a", "corrupt-file"), ("b", "corrupt-file"), ("c", "bad-object-name")):
        registry.quarantine(QuarantineEntry(uri, reason, f"{uri} is bad"))
    q = reader.quarantine()
    assert q["total"] == 3 and q["by_reason"] == {"bad-object-name": 1, "corrupt-file": 2}
    assert q["recent"][0]["object_uri"] == "c"
    assert reader.quarantine(since=datetime.now(UTC) + timedelta(hours=1))["total"] == 0


@pytest.mark.parametrize(
    ("readout", "registered"),
    [
        ("2026-11-22 03:00:00.000000", "2026-11-22 03:00:02.999936"),  # rounds up in SQLite
        ("2026-11-22 03:00:00.999999", "2026-11-22 03:00:01.000001"),
        ("2026-11-22 23:59:59.500000", "2026-11-23 00:00:04.250000"),  # across midnight
    ],
)
def test_latency_is_exact_to_the_microsecond(tmp_path, readout, registered):
    from sqlalchemy import insert

    from obsingest.registry import tables

    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    registry = Registry.open(RegistrySettings(url=url))
    register(registry, E1, 0, 1.0)  # the run and exposure rows
    t0, t1 = (datetime.fromisoformat(t).replace(tzinfo=UTC) for t in (readout, registered))
    ds = dataset_id(DataId("LSSTComCam", E1, 1), "raw", "LSSTComCam/raw/all")
    with registry.engine.begin() as conn:
        conn.execute(
            insert(tables.dataset).values(
                id=ds,
                dataset_type="raw",
                run="LSSTComCam/raw/all",
                instrument="LSSTComCam",
                exposure=E1,
                detector=1,
                ingest_time=t1,
            )
        )
        conn.execute(
            insert(tables.datastore_record).values(
                dataset_id=ds, uri="u", size=1, checksum="c", readout_time=t0
            )
        )
    registry.close()
    reader = PresenceReader.open(RegistrySettings(url=url), 5.0)
    try:
        expected = (t1 - t0).total_seconds()
        assert reader.ccd("LSSTComCam", E1, 1).latency_seconds == pytest.approx(expected, abs=1e-9)
        other = reader.ccd("LSSTComCam", E1, 0).latency_seconds
        e = reader.exposure("LSSTComCam", E1)  # the same arithmetic over the exposure's rows
        assert e.latency_max == pytest.approx(max(expected, other), abs=1e-9)
        assert e.latency_p50 == pytest.approx((expected + other) / 2, abs=1e-9)
    finally:
        reader.close()


def test_a_butler_registry_is_read_through_its_companion_tables(tmp_path, monkeypatch):
    from obsingest.registry.engine import readonly_url

    monkeypatch.delenv("OBSINGEST_BUTLER_COMPANION_URL", raising=False)
    assert readonly_url(f"butler://{tmp_path}/repo") == (
        f"sqlite:///{tmp_path / 'repo' / 'obsingest.sqlite3'}"
    )
    monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", "postgresql://ro@db/companion")
    assert readonly_url("butler:s3://bucket/repo") == "postgresql://ro@db/companion"
    assert readonly_url("sqlite:///x.sqlite3") == "sqlite:///x.sqlite3"
