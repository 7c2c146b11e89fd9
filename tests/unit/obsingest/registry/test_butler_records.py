"""Butler dimension records from obsingest's records (pure: no daf_butler needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsingest.registry import ExposureRecord
from obsingest.registry.butler_repo import default_companion_url, is_butler_url, repo_of
from obsingest.registry.butler_setup import day_obs_timespan, exposure_records, instrument_records

pytestmark = pytest.mark.unit

START = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def test_instrument_and_detector_records_as_obs_lsst_registers_them():
    instrument, detectors = instrument_records("LSSTCam")
    assert instrument["class_name"] == "lsst.obs.lsst.LsstCam"
    assert len(detectors) == 205
    assert detectors[204] == {
        "instrument": "LSSTCam",
        "id": 204,
        "full_name": "R44_SW1",
        "name_in_raft": "SW1",
        "raft": "R44",
        "purpose": "WAVEFRONT",
    }


def test_exposure_records_from_a_full_header_record():
    exp = ExposureRecord(
        "LSSTCam",
        2026112200012,
        20261122,
        obs_start=START,
        exposure_time=30.0,
        physical_filter="r_57",
        band="r",
        obs_id="MC_O_20261122_000012",
        group_name="2026-11-22T03:00:00.000",
        seq_num=12,
        observation_type="science",
        dark_time=30.5,
    )
    records = exposure_records(exp)
    assert records["physical_filter"] == {"instrument": "LSSTCam", "name": "r_57", "band": "r"}
    assert records["group"]["name"] == "2026-11-22T03:00:00.000"
    e = records["exposure"]
    assert (e["obs_id"], e["seq_start"], e["seq_end"], e["dark_time"]) == (
        "MC_O_20261122_000012",
        12,
        12,
        30.5,
    )
    begin, end = e["timespan"]
    assert (end - begin).total_seconds() == 30.0
    assert records["day_obs"]["timespan"] == day_obs_timespan(20261122)


def test_a_bare_exposure_gets_obs_lsst_defaults():
    e = exposure_records(ExposureRecord("LSSTComCam", 2026112200003, 20261122))
    assert e["physical_filter"] == {"instrument": "LSSTComCam", "name": "unknown", "band": "unknown"}
    assert (e["exposure"]["obs_id"], e["exposure"]["group"]) == ("CC_O_20261122_000003", "2026112200003")
    assert e["exposure"]["timespan"] is None
    assert e["exposure"]["observation_type"] == "unknown"


def test_day_obs_runs_noon_to_noon():
    begin, end = day_obs_timespan(20261122)
    assert begin == datetime(2026, 11, 22, 12, tzinfo=UTC)
    assert end == datetime(2026, 11, 23, 12, tzinfo=UTC)


def test_registry_urls_that_name_a_butler(tmp_path):
    assert is_butler_url("butler:///data/repo") and not is_butler_url("sqlite:///x")
    assert repo_of("butler:///data/repo") == "/data/repo"
    assert repo_of("butler:repo") == "repo"
    assert repo_of("butler:s3://bucket/repo") == "s3://bucket/repo"
    assert default_companion_url(str(tmp_path)) == f"sqlite:///{tmp_path}/obsingest.sqlite3"
    assert default_companion_url(str(tmp_path / "butler.yaml")).endswith(f"{tmp_path}/obsingest.sqlite3")
    with pytest.raises(ValueError, match="OBSINGEST_BUTLER_COMPANION_URL"):
        default_companion_url("s3://bucket/repo")


@pytest.mark.parametrize(
    ("fields", "day_obs"),
    [
        ({"obs_start": datetime(1969, 12, 31, 23, tzinfo=UTC), "exposure_time": 30.0}, 20261122),
        ({"obs_start": datetime(2100, 6, 1, tzinfo=UTC), "exposure_time": 30.0}, 20261122),
        ({"obs_start": START, "exposure_time": float("inf")}, 20261122),
        ({"obs_start": START, "exposure_time": 1e308}, 20261122),
        ({"obs_start": START, "exposure_time": 30.0}, 21500101),  # a day_obs dataid accepts
    ],
)
def test_times_the_butler_cannot_hold_give_no_timespan_not_an_error(fields, day_obs):
    """daf_butler keeps timespans from 1970 to 2100 (TAI); outside, or an end that overflows,
    raised in the set-up of the Butler batch: RegistryUnavailable for every CCD of the batch,
    other exposures' too, at every redelivery. Such a record has no timespan instead."""
    pytest.importorskip("lsst.daf.butler")
    from obsingest.registry.butler_setup import with_timespan

    exposure = 2026112200012 if day_obs == 20261122 else 2150010100012
    records = exposure_records(ExposureRecord("LSSTCam", exposure, day_obs, **fields))
    for element in ("day_obs", "exposure"):
        with_timespan(records[element])
    assert records["day_obs" if day_obs != 20261122 else "exposure"]["timespan"] is None
