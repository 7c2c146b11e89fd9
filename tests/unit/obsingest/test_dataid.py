import json
import uuid

import pytest

from obsingest.dataid import (
    DataId,
    dataset_id,
    exposure_day_obs,
    identity_cards,
    identity_from_header,
    make_exposure_id,
    parse_object_name,
    parse_obs_id,
)
from obsingest.errors import BadObjectName, NoIdentity, UnknownInstrument
from tests.fixtures.camera_files import REAL_HEADERS as REAL
from tests.fixtures.camera_files import real_headers

pytestmark = pytest.mark.unit

GOOD = "raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz"
RUBIN = "raw/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000060_R01_S01.fits"


def test_round_trip_of_a_good_name():
    data_id = parse_object_name(RUBIN)
    assert data_id == DataId("LSSTCam", 2025041500060, 1)
    assert data_id.day_obs == 20250415
    assert data_id.object_name() == RUBIN


def test_names_of_earlier_versions_stay_readable():
    data_id = parse_object_name(GOOD)
    assert data_id == DataId("LSSTCam", 2026112200042, 117)
    assert data_id.day_obs == 20261122


@pytest.mark.parametrize(("name", "header"), real_headers())
def test_identity_of_every_real_header_matches_rubins_translator(name, header):
    expected = {e["file"]: e for e in json.loads((REAL / "expected-observation-info.json").read_text())}
    want = expected[name]
    identity = identity_from_header(header.get, name)
    assert identity.data_id == DataId(want["instrument"], want["exposure_id"], want["detector_num"])
    assert identity.data_id.day_obs == want["observing_day"]
    assert identity.data_id.seq_num == want["observation_counter"]
    assert identity.obs_id == want["observation_id"]
    assert identity.group == want["exposure_group"]
    # the object name is the camera's file name, in Rubin's layout, and parses back
    name_part = name.split("-", 1)[1].rsplit(".", 1)[0]
    if name_part.startswith(("MC_", "CC_", "AT_")):
        assert identity.file_name == f"{name_part}.fits"
    assert parse_object_name(identity.object_name()) == identity.data_id


@pytest.mark.parametrize(("name", "header"), real_headers())
def test_identity_cards_are_the_inverse_of_identity_from_header(name, header):
    identity = identity_from_header(header.get, name)
    cards = identity_cards(identity)
    back = identity_from_header(cards.get, "written")
    assert (back.data_id, back.obs_id, back.raft, back.sensor) == (
        identity.data_id,
        identity.obs_id,
        identity.raft,
        identity.sensor,
    )
    if "CAMCODE" in header:  # a camera header of today (HEADVER 2): the very cards it holds
        assert cards == {key: header[key] for key in cards}


def test_controller_offsets_follow_obs_lsst():
    assert make_exposure_id(20190322, 2, "C") == 3019032200002
    assert exposure_day_obs(3019032200002) == 20190322
    assert make_exposure_id(20231107, 78, "C") == 2023110700078  # C shares the OCS counter
    assert make_exposure_id(20100217, 32, "H") == 4010021700032
    assert make_exposure_id(20250422, 5, "S") == 2025042200005
    assert make_exposure_id(20200329, 22, "X") == 2020032900022  # unknown letter: no offset
    old = DataId("LSSTCam", 3019032200002, 30)
    assert old.day_obs == 20190322
    assert parse_object_name(old.object_name()) == old
    assert "MC_C_20190322_000002" in old.object_name()
    assert parse_obs_id("AT_O_20240624_000106") == ("LATISS", "O", 20240624, 106)


@pytest.mark.parametrize(
    ("cards", "message"),
    [
        ({}, "no INSTRUME"),
        ({"INSTRUME": "lsstCam", "RAFTBAY": "R01", "CCDSLOT": "S01"}, "no OBSID and no DAYOBS"),
        ({"INSTRUME": "lsstCam", "OBSID": "MC_O_20250415_000060", "CCDSLOT": "S01"}, "RAFTBAY"),
        (
            {"INSTRUME": "lsstCam", "OBSID": "MC_O_20250415_000060", "RAFTBAY": "R01", "CCDSLOT": "S99"},
            "no such detector",
        ),
        ({"INSTRUME": "lsstCam", "OBSID": "CC_O_20250415_000060"}, "is of LSSTComCam"),
        ({"INSTRUME": "lsstCam", "OBSID": "MC_O_20250415_000060", "SEQNUM": 61}, "SEQNUM='61'"),
    ],
)
def test_a_header_without_identity_names_the_card(cards, message):
    with pytest.raises(NoIdentity, match=message) as info:
        identity_from_header(cards.get, "x.fits")
    assert "x.fits" in str(info.value)
    assert info.value.reason == "no-identity"


@pytest.mark.parametrize(
    ("cards", "want"),
    [
        # the identity cards of obs_lsst's tests/headers/comCam-CC_C_20190526_000223_R22_S01
        (
            {
                "INSTRUME": "LSST_CAMERA",
                "TELCODE": "CC",
                "OBSID": "CC_C_20190526_000223",
                "RAFTBAY": "R22",
                "CCDSLOT": "S01",
                "DAYOBS": "20190526",
                "SEQNUM": 223,
            },
            (DataId("LSSTComCam", 3019052600223, 1), "CC_C_20190526_000223"),
        ),
        # ... of latiss-2018-09-20-05700065-det000: LATISS's INSTRUME before 2019
        (
            {
                "INSTRUME": "LSST_ATISS",
                "TELCODE": "AT",
                "OBSID": "AT_C_20180920_000065",
                "DAYOBS": "20180920",
                "SEQNUM": 65,
                "CONTRLLR": "C",
            },
            (DataId("LATISS", 3018092000065, 0), "AT_C_20180920_000065"),
        ),
        # ... of latiss-AT_O_20190306_000014: no OBSID, DAYOBS or SEQNUM, the id in IMGNAME
        (
            {"INSTRUME": "LATISS", "IMGNAME": "AT_O_20190306_000014"},
            (DataId("LATISS", 2019030600014, 0), "AT_O_20190306_000014"),
        ),
    ],
)
def test_older_headers_have_the_identity_obs_lsst_gives_them(cards, want):
    """Headers obs_lsst's translators accept although their cards differ from today's (values
    of obs_lsst's own tests/headers/, identity as its translators compute it)."""
    identity = identity_from_header(cards.get, "x.fits")
    assert (identity.data_id, identity.obs_id) == want


def test_lsst_camera_without_comcams_telcode_is_not_an_instrument():
    with pytest.raises(UnknownInstrument, match="LSST_CAMERA"):
        identity_from_header({"INSTRUME": "LSST_CAMERA", "TELCODE": "TS"}.get, "x.fits")


def test_an_unknown_header_instrument_is_its_own_reason():
    with pytest.raises(UnknownInstrument, match="INSTRUME='hsc'"):
        identity_from_header({"INSTRUME": "hsc"}.get, "x.fits")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("other/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz", "outside"),
        ("raw//LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits.fz", "absolute"),
        ("raw/LSSTCam/20261122/../../../etc/passwd", r"escapes"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_1x7.fits.fz", "does not match"),
        ("raw/LSSTCam/20261122/2026112200042/LSSTCam_2026112200042_117.fits", "does not match"),
        ("raw/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000061_R01_S01.fits", "not match"),
        ("raw/LSSTCam/20250416/MC_O_20250415_000060/MC_O_20250415_000060_R01_S01.fits", "day_obs"),
        ("raw/LSSTCam/20250415/CC_O_20250415_000060/CC_O_20250415_000060_R22_S01.fits", "not of"),
        ("raw/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000060_R00_S11.fits", "detector"),
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


def test_what_a_name_claims_any_name_below_the_prefix_claims_nothing():
    from obsingest.dataid import name_claim

    assert name_claim(RUBIN) == (DataId("LSSTCam", 2025041500060, 1), "MC_O_20250415_000060")
    assert name_claim(GOOD) == (DataId("LSSTCam", 2026112200042, 117), None)
    for name in ("raw/incoming/ccd 7.fits", "raw/LSSTCam/20250415/x.fits", "raw/flat.fits.fz"):
        assert name_claim(name) is None  # taken: its header will say which CCD it is
    for name, message in (
        ("elsewhere/x.fits", "outside"),
        ("raw/../x.fits", "escapes"),
        ("raw/a\x00b.fits", "control character"),
        ("raw/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000060_R00_S11.fits", "detector"),
    ):
        with pytest.raises(BadObjectName, match=message):
            name_claim(name)
