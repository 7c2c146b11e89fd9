"""Real Rubin headers translate to exactly what Rubin's own translators computed for them, and
register as the exposure records the Butler would hold (times converted from TAI, not relabelled).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import astropy.units as u
import pytest
from astropy.time import Time

from obsingest import translate
from obsingest.dataid import DataId
from obsingest.registry.headers import exposure_from_header
from obsingest.translate.observe import ObservationCache
from tests.unit.obsingest.translate.real_headers import (
    EXPECTED,
    WAVEFRONT,
    fits_primary,
    read,
    wavefront_correction,
)

pytestmark = pytest.mark.unit

IDENTITY = (
    "instrument",
    "exposure_id",
    "detector_num",
    "detector_name",
    "detector_group",
    "observing_day",
    "observation_counter",
    "observation_id",
    "exposure_group",
)
STRINGS = (
    "physical_filter",
    "observation_type",
    "observation_reason",
    "science_program",
    "object",
    "can_see_sky",
    "has_simulated_content",
)
BY_FILE = {e["file"]: e for e in EXPECTED}


@pytest.fixture(scope="module")
def corrections(tmp_path_factory) -> list[str]:
    return [str(wavefront_correction(tmp_path_factory.mktemp("corrections")))]


def _quantity(text: str | None) -> float | None:
    return None if text is None else float(text.split()[0])


@pytest.mark.parametrize("name", sorted(BY_FILE))
def test_every_real_header_translates_to_what_rubin_computes_field_by_field(name, corrections):
    expected = BY_FILE[name]
    result = ObservationCache(corrections).observation(read(name))
    info = result.info
    for field in IDENTITY:
        assert getattr(result.identity, field) == expected[field], field
        assert getattr(info, field) == expected[field], field
    for field in STRINGS:
        assert getattr(info, field) == expected[field], field
    for field in ("datetime_begin", "datetime_end"):
        ours, theirs = getattr(info, field), expected[field]
        assert (ours.isot, ours.scale) == (theirs["isot"], theirs["scale"]), field
        assert (ours.utc.isot, ours.tai.isot) == (theirs["utc"], theirs["tai"]), field
    assert info.exposure_time.to_value(u.s) == _quantity(expected["exposure_time"])
    assert info.dark_time.to_value(u.s) == _quantity(expected["dark_time"])
    angle = _quantity(expected["boresight_rotation_angle"])
    if angle is None:
        assert info.boresight_rotation_angle is None or math.isnan(info.boresight_rotation_angle.deg)
    else:
        assert info.boresight_rotation_angle.to_value(u.deg) == angle
    radec = info.tracking_radec
    assert (None if radec is None else [radec.ra.deg, radec.dec.deg]) == expected["tracking_radec"]
    altaz = info.altaz_begin
    assert (None if altaz is None else [altaz.alt.deg, altaz.az.deg]) == expected["altaz_begin"]
    assert result.corrected == expected["fix_header_applied"]
    assert result.translator == expected["translator"]


def test_without_its_correction_file_the_wavefront_header_lacks_its_pointing():
    """The correction is what the comparison needs: without it, pointing and target are gone
    (and the warnings say why), which is why the test above writes it."""
    result = ObservationCache([]).observation(read(WAVEFRONT))
    assert result.info.tracking_radec is None and result.info.altaz_begin is None
    assert result.info.object == "UNKNOWN"
    assert any("altaz_begin" in w for w in result.warnings)
    assert result.identity.detector_num == 203


@pytest.mark.parametrize("name", sorted(BY_FILE))
def test_every_real_header_registers_as_its_exposure_record_from_fits(name, corrections, monkeypatch):
    monkeypatch.setattr(translate, "_cache", ObservationCache(corrections))
    expected = BY_FILE[name]
    data_id = DataId(expected["instrument"], expected["exposure_id"], expected["detector_num"])
    record = exposure_from_header(fits_primary(read(name)), data_id, name)

    def utc(field: str) -> datetime:
        value = expected[field]
        return Time(value["isot"], scale=value["scale"]).utc.to_datetime(timezone=UTC)

    # the expected times are printed to the millisecond; the translated ones (from MJD-BEG,
    # as Rubin's) carry the microseconds
    info = translate.observation(read(name)).info
    assert record.obs_start == info.datetime_begin.utc.to_datetime(timezone=UTC)
    assert record.obs_end == info.datetime_end.utc.to_datetime(timezone=UTC)
    ms = 0.0005
    assert abs((record.obs_start - utc("datetime_begin")).total_seconds()) <= ms
    assert abs((record.obs_end - utc("datetime_end")).total_seconds()) <= ms
    # the camera's TAI is 37 s ahead of UTC: the instant is converted, not relabelled
    begin_tai = datetime.fromisoformat(expected["datetime_begin"]["tai"]).replace(tzinfo=UTC)
    assert (begin_tai - record.obs_start).total_seconds() == pytest.approx(37.0, abs=ms)
    assert (record.day_obs, record.seq_num) == (expected["observing_day"], expected["observation_counter"])
    assert (record.obs_id, record.group_name) == (expected["observation_id"], expected["exposure_group"])
    assert record.physical_filter == expected["physical_filter"]
    assert (record.observation_type, record.observation_reason) == (
        expected["observation_type"],
        expected["observation_reason"],
    )
    assert record.exposure_time == _quantity(expected["exposure_time"])
    assert record.dark_time == _quantity(expected["dark_time"])
    assert (record.science_program, record.target_name) == (expected["science_program"], expected["object"])
    assert record.can_see_sky == expected["can_see_sky"]
    assert record.has_simulated == expected["has_simulated_content"]
    angle = _quantity(expected["boresight_rotation_angle"])
    assert record.sky_angle == angle
    radec = expected["tracking_radec"]
    assert [record.tracking_ra, record.tracking_dec] == (radec or [None, None])
    altaz = expected["altaz_begin"]
    if altaz is None:
        assert (record.azimuth, record.zenith_angle) == (None, None)
    else:
        assert record.azimuth == altaz[1]
        assert record.zenith_angle == pytest.approx(90.0 - altaz[0], abs=1e-9)


def test_bands_of_the_real_headers():
    bands = {e["file"]: translate.band(e["physical_filter"]) for e in EXPECTED}
    assert bands == {
        "comCam-CC_O_20241108_000266_R22_S00.yaml": "g",
        "latiss-AT_O_20240624_000106_R00_S00.yaml": "r",
        "latiss-future-bad.yaml": "unknown",
        "lsstCam-MC_C_20231107_000078_R01_S01.json": "white",
        "lsstCam-MC_O_20250415_000060_R01_S01.yaml": "i",
        "lsstCam-MC_O_20251121_000156_R44_SW0.json": "i",
    }
