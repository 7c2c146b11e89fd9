"""The simulator writes what the camera writes: names, identity cards, TAI times, empty cards, and
real headers as templates; checked against ``identity_from_header``, the register path and the
real Rubin headers in ``tests/fixtures/real_headers``."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from astropy.io import fits
from astropy.time import Time

from obsingest.dataid import DataId, identity_from_header
from obsingest.fits import parse_primary
from obsingest.registry.headers import exposure_from_header
from obsingest.timescales import header_instant
from producers.daq.header import HARDWARE, REPLACED, load_template, template_detector, template_instrument
from producers.daq.simulator import CcdSpec, generate_raw_ccd, header_cards

pytestmark = pytest.mark.unit

REAL = Path(__file__).parents[2] / "fixtures" / "real_headers"
REAL_HEADERS = sorted(
    p for p in REAL.iterdir() if p.suffix in {".yaml", ".json"} and "expected" not in p.name
)
START = datetime(2026, 11, 23, 3, 4, 5, 250000, tzinfo=UTC)


def _spec(instrument: str = "LSSTCam", detector: int = 94, **change: object) -> CcdSpec:
    spec = CcdSpec(instrument, 2026112200012, detector, 20261122, START, 30.0, "r", "small", 3)
    return replace(spec, **change)  # type: ignore[arg-type]


def _primary(spec: CcdSpec) -> fits.Header:
    return fits.open(io.BytesIO(generate_raw_ccd(spec)))[0].header


def _hdu(spec: CcdSpec):
    return parse_primary(generate_raw_ccd(spec)[: 2880 * 8])


@pytest.mark.parametrize(
    ("instrument", "detector", "file_name"),
    [
        ("LSSTCam", 94, "MC_O_20261122_000012_R22_S11.fits"),
        ("LSSTCam", 203, "MC_O_20261122_000012_R44_SW0.fits"),  # a corner wavefront sensor
        ("LSSTCam", 189, "MC_O_20261122_000012_R00_SG0.fits"),  # a guider
        ("LSSTComCam", 4, "CC_O_20261122_000012_R22_S11.fits"),
        ("LATISS", 0, "AT_O_20261122_000012_R00_S00.fits"),  # R00 as the camera names it
    ],
)
def test_the_header_gives_the_intended_identity(instrument, detector, file_name) -> None:
    spec = _spec(instrument, detector)
    assert spec.file_name == file_name
    identity = identity_from_header(_hdu(spec).str_value, file_name)
    assert identity.data_id == DataId(instrument, 2026112200012, detector)
    assert identity.file_name == file_name
    assert identity.obs_id == file_name[:20]
    assert identity.group == _primary(spec)["GROUPID"]


def test_an_offset_controller_keeps_its_exposure_id() -> None:
    """obs_lsst raises the year by 1000 for the CCS's own counter (before 2023-10-05)."""
    spec = CcdSpec("LSSTCam", 3023090100078, 1, 20230901, START, 0.0, "r", "small", controller="C")
    header = _primary(spec)
    assert header["OBSID"] == "MC_C_20230901_000078"
    assert (header["CONTRLLR"], header["DAYOBS"]) == ("C", "20230901")
    identity = identity_from_header(_hdu(spec).str_value, spec.file_name)
    assert identity.data_id.exposure == 3023090100078
    assert spec.file_name == "MC_C_20230901_000078_R01_S01.fits"


@pytest.mark.parametrize(("instrument", "detector"), [("LSSTCam", 94), ("LSSTComCam", 8)])
def test_the_register_path_accepts_the_simulated_header(instrument, detector) -> None:
    spec = _spec(instrument, detector)
    hdu = _hdu(spec)
    data_id = identity_from_header(hdu.str_value, spec.file_name).data_id
    record = exposure_from_header(hdu, data_id, spec.file_name)
    assert (record.exposure, record.day_obs, record.seq_num) == (2026112200012, 20261122, 12)
    assert record.obs_id == spec.identity.obs_id
    assert record.physical_filter == {"LSSTCam": "r_57", "LSSTComCam": "r_03"}[instrument]


def test_times_are_tai_and_name_the_spec_s_utc_instants() -> None:
    spec = _spec()
    header = _primary(spec)
    assert header["TIMESYS"] == "TAI"
    begin = header_instant(header["DATE-BEG"], header["TIMESYS"])
    end = header_instant(header["DATE-END"], header["TIMESYS"])
    assert begin == spec.obs_start
    assert spec.readout_time == spec.obs_start + timedelta(seconds=header["DARKTIME"])
    assert abs(end - spec.readout_time) <= timedelta(milliseconds=1)  # the camera writes ms
    # read as UTC, as a header without TIMESYS would be, the same text is 37 s later
    assert header_instant(header["DATE-BEG"]) - begin == timedelta(seconds=37)
    for key in ("OBS", "BEG", "END", "TRG"):
        mjd = Time(header[f"MJD-{key}"], format="mjd", scale="tai")
        assert abs((mjd - Time(header[f"DATE-{key}"], scale="tai")).sec) < 1e-3, key  # ms
    assert header["DATE-TRG"] == header["DATE-END"]
    # requested, measured and dark times as LSSTCam writes them
    assert (header["EXPTIME"], header["SHUTTIME"], header["DARKTIME"]) == (30.0, 30.001, 30.9318)


def test_every_sensor_has_a_serial_of_its_kind() -> None:
    """LSST_NUM (the translators' detector_serial): part number by sensor type, fixed."""
    serials = {d: _primary(_spec("LSSTCam", d))["LSST_NUM"] for d in (0, 94, 203)}
    assert serials == {0: "ITL-3800C-100", 94: "E2V-CCD250-194", 203: "ITL-4400B-303"}


def test_a_bias_has_no_shutter_time_but_a_dark_time() -> None:
    header = _primary(_spec(exposure_time=0.0))
    assert (header["IMGTYPE"], header["EXPTIME"], header["SHUTTIME"]) == ("BIAS", 0.0, 0.0)
    assert header["DARKTIME"] == 0.092


def test_the_empty_cards_real_headers_have_are_there_and_empty() -> None:
    spec = _spec()
    header = _primary(spec)
    assert "SEEING" in header and header["SEEING"] is None
    assert header["OBSANNOT"] == ""
    assert dict(header_cards(spec))["SEEING"] is None
    assert _hdu(spec).value("SEEING") == ""  # present, no value


def test_every_card_the_simulator_writes_is_one_the_camera_writes() -> None:
    """No invented cards: each card of a default header appears in a real header."""
    real: set[str] = set()
    for path in REAL_HEADERS:
        real |= {key for key, _ in load_template(path)}
    for instrument, detector in (("LSSTCam", 94), ("LSSTComCam", 0), ("LATISS", 0)):
        written = {key for key, _ in header_cards(_spec(instrument, detector))}
        assert written - real == set(), instrument
        needed = "OBSID DAYOBS SEQNUM CONTRLLR CAMCODE GROUPID RAFTBAY CCDSLOT IMGTYPE FILTER"
        assert {*needed.split(), "FILTBAND", "TIMESYS"} <= written


@pytest.mark.parametrize("path", REAL_HEADERS, ids=lambda p: p.name)
def test_a_real_header_as_template(path: Path) -> None:
    template = load_template(path)
    instrument = template_instrument(template)
    own = template_detector(template)
    detector = {"LSSTCam": 94, "LSSTComCam": 8, "LATISS": 0}[instrument]
    spec = _spec(instrument, detector, template=template)
    cards = dict(header_cards(spec))
    original = dict(template)
    header = _primary(spec)
    # identity and times are this CCD's
    identity = identity_from_header(_hdu(spec).str_value, spec.file_name)
    assert identity.data_id == DataId(instrument, 2026112200012, detector)
    assert cards["FILENAME"] == spec.file_name
    assert header_instant(header["DATE-BEG"], header["TIMESYS"]) == spec.obs_start
    assert header["EXPTIME"] == 30.0
    # everything else is the template's, empty cards included
    kept = [k for k in original if k not in cards and k not in HARDWARE]
    assert kept == []
    for key in ("OBJECT", "ROTPA", "PROGRAM", "REASON", "TELESCOP", "IMGTYPE", "FILTER"):
        if key in original:
            assert cards[key] == original[key], key
    nulls = [k for k, v in original.items() if v is None and k not in REPLACED | HARDWARE]
    assert nulls and all(cards[k] is None for k in nulls)
    # the template's sensor serials belong to its own detector only
    if "LSST_NUM" in original:
        assert (cards["LSST_NUM"] == original["LSST_NUM"]) == (own == detector)
        assert ("CCD_SERN" in cards) == (own == detector)


def test_a_template_s_other_times_move_with_the_exposure() -> None:
    path = REAL / "lsstCam-MC_O_20251121_000156_R44_SW0.json"
    template = load_template(path)
    spec = _spec("LSSTCam", 203, template=template)
    cards = dict(header_cards(spec))
    was, now = dict(template), cards
    key = "HIERARCH.SHUTTER.OPEN.STARTTIME.TAI.ISOT"
    shift = Time(now["DATE-BEG"], scale="tai") - Time(was["DATE-BEG"], scale="tai")
    moved = Time(now[key], scale="tai") - Time(was[key], scale="tai")
    assert abs((moved - shift).sec) < 1e-3  # the shutter still opens 8 ms after DATE-BEG
    assert now["LSST_NUM"] == was["LSST_NUM"]  # its own detector: its serials stay
    header = _primary(spec)
    assert header["HIERARCH SHUTTER OPEN SIDE"] == "PLUSX"


def test_a_template_of_another_camera_is_refused() -> None:
    template = load_template(REAL / "latiss-AT_O_20240624_000106_R00_S00.yaml")
    with pytest.raises(ValueError, match="LATISS header, not LSSTCam"):
        generate_raw_ccd(_spec(template=template))


def test_a_dump_without_instrument_is_not_a_template(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"SIMPLE": True}))
    with pytest.raises(ValueError, match="INSTRUME"):
        load_template(path)
