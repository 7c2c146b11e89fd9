import uuid

import pytest

from obsingest.dataid import DataId, dataset_id, make_exposure_id, parse_object_name
from obsingest.errors import BadObjectName, UnknownInstrument

pytestmark = pytest.mark.unit

GOOD = "raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz"


def test_round_trip_of_a_good_name():
    data_id = parse_object_name(GOOD)
    assert data_id == DataId("LSSTCam", 2026112200042, 117)
    assert data_id.day_obs == 20261122
    assert data_id.object_name() == GOOD


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("other/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz", "outside"),
        ("raw//LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz", "absolute"),
        ("raw/LSSTCam/20261122/../../../etc/passwd", r"escapes"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_1x7.fits.fz", "does not match"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits", "does not match"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200043_117.fits.fz", "disagree"),
        ("raw/LSSTCam/20261121/2026112200042/LSSTCam_2026112200042_117.fits.fz", "day_obs"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_205.fits.fz", "out of range"),
        ("raw/LATISS/20261122/2026112200042/LATISS_2026112200042_001.fits.fz", "out of range"),
        ("raw/LSSTCam/20261399/2026139900042/LSSTCam_2026139900042_001.fits.fz", "YYYYMMDD"),
    ],
)
def test_bad_names_are_refused_with_the_name_and_reason(name, message):
    with pytest.raises(BadObjectName, match=message) as info:
        parse_object_name(name)
    assert repr(name) in str(info.value)


def test_unknown_instrument_is_its_own_reason():
    name = "raw/Nonesuch/20261122/2026112200042/Nonesuch_2026112200042_001.fits.fz"
    with pytest.raises(UnknownInstrument) as info:
        parse_object_name(name)
    assert info.value.reason == "unknown-instrument"


def test_dataset_id_is_deterministic_and_depends_on_type_run_and_data_id():
    a = DataId("LSSTComCam", 2026112200001, 4)
    first = dataset_id(a, "raw", "LSSTComCam/raw/all")
    assert first == dataset_id(DataId("LSSTComCam", 2026112200001, 4), "raw", "LSSTComCam/raw/all")
    assert first.version == 5
    assert first != dataset_id(a, "raw", "other/run")
    assert first != dataset_id(DataId("LSSTComCam", 2026112200001, 5), "raw", "LSSTComCam/raw/all")
    assert isinstance(first, uuid.UUID)


def test_exposure_ids():
    assert make_exposure_id(20261122, 7) == 2026112200007
    with pytest.raises(ValueError):
        make_exposure_id(20261122, 100000)


@pytest.mark.parametrize("detector", [189, 190, 191, 198, 204])
def test_lsstcam_corner_rafts_are_accepted(detector):
    """Guider (189, 190, ...) and wavefront (191, 192, ...) sensors flow like science CCDs."""
    name = f"raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_{detector:03d}.fits.fz"
    assert parse_object_name(name).detector == detector
