"""The Butler's exposure record from raw headers: read, validated against the data id."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from obsingest.dataid import DataId
from obsingest.errors import HeaderMismatch
from obsingest.fits import make_card, parse_fits
from obsingest.registry.headers import BadHeader, exposure_from_header
from producers.daq.simulator import CcdSpec, generate_raw_ccd

pytestmark = pytest.mark.unit

START = datetime(2026, 11, 23, 3, 4, 5, 250000, tzinfo=UTC)
SPEC = CcdSpec("LSSTCam", 2026112200012, 191, 20261122, START, 30.0, "r", "small", seed=3)
DID = DataId("LSSTCam", 2026112200012, 191)


def _primary(raw: bytes):
    return parse_fits(raw)[0]


def _with_card(raw: bytes, key: str, value: object) -> bytes:
    """The raw with the value of ``key`` replaced (the card keeps its place)."""
    start = raw.index(key.encode().ljust(8) + b"= ")
    return raw[:start] + make_card(key, value) + raw[start + 80 :]


def test_every_field_of_the_butler_exposure_record_comes_from_the_header():
    record = exposure_from_header(_primary(generate_raw_ccd(SPEC)), DID, "x")
    assert record.obs_id == "MC_O_20261122_000012"
    # the simulator writes the camera's cards: GROUPID and DATE-BEG in TAI, SHUTTIME measured
    assert record.group_name == "2026-11-23T03:04:38.820"
    assert (record.day_obs, record.seq_num) == (20261122, 12)
    assert (record.physical_filter, record.band) == ("r_57", "r")
    assert (record.observation_type, record.observation_reason) == ("science", "science")
    assert (record.exposure_time, record.dark_time) == (30.001, 30.9318)
    assert record.obs_start == START  # the UTC instant; the DATE-BEG card says 03:04:42.250 TAI
    assert (record.obs_end - record.obs_start).total_seconds() == pytest.approx(30.932)
    assert 0 <= record.tracking_ra < 360 and -90 <= record.tracking_dec <= 10
    assert record.sky_angle is not None and 5 <= record.zenith_angle <= 55
    assert (record.science_program, record.target_name) == ("obsingest-sim", "simulated field")
    assert (record.has_simulated, record.can_see_sky) == (False, True)
    assert record.header_warnings == ()


def test_every_ccd_of_an_exposure_gives_the_same_record():
    records = {
        exposure_from_header(
            _primary(generate_raw_ccd(replace(SPEC, detector=d))), replace(DID, detector=d), "x"
        )
        for d in (0, 94, 189, 191, 204)
    }
    assert len(records) == 1


def test_a_bias_cannot_see_the_sky():
    raw = generate_raw_ccd(replace(SPEC, exposure_time=0.0))
    record = exposure_from_header(_primary(raw), DID, "x")
    assert (record.observation_type, record.can_see_sky) == ("bias", False)


@pytest.mark.parametrize(
    ("key", "value", "error", "words"),
    [
        ("RAFTBAY", "R01", BadHeader, "RAFTBAY='R01' CCDSLOT='SW0' gives no identity"),
        ("CCDSLOT", "SG0", HeaderMismatch, "is R00_SW0"),
        ("DAYOBS", "20261123", HeaderMismatch, "day_obs 20261122"),
        ("SEQNUM", 13, HeaderMismatch, "seq_num 12"),
        ("OBSID", "X" * 65, BadHeader, "OBSID gives a obs_id of 65 characters"),
        ("RAFTBAY", "", BadHeader, "RAFTBAY='' CCDSLOT='SW0' gives no identity"),
        ("SEQNUM", "'x'", BadHeader, "SEQNUM=\"'x'\" gives no identity"),
    ],
)
def test_contradicting_or_unusable_values_are_refused_naming_the_keyword(key, value, error, words):
    raw = _with_card(generate_raw_ccd(SPEC), key, value)
    with pytest.raises(error, match=".*".join(map(_escape, words.split()))) as info:
        exposure_from_header(_primary(raw), DID, "raw/the-object")
    assert "raw/the-object" in str(info.value)
    assert info.value.reason == ("bad-header" if error is BadHeader else "header-mismatch")


def test_a_header_of_another_instrument_is_a_mismatch():
    with pytest.raises(HeaderMismatch, match="INSTRUME='lsstCam' is LSSTCam, not LSSTComCam"):
        exposure_from_header(_primary(generate_raw_ccd(SPEC)), DataId("LSSTComCam", DID.exposure, 0), "x")


@pytest.mark.parametrize(
    ("key", "value", "field", "words"),
    [
        ("DECSTART", 95.0, "tracking_dec", "tracking_radec"),
        ("DATE-BEG", "yesterday", "obs_start", "datetime_begin"),
        ("DARKTIME", "'soon'", "dark_time", "dark_time"),
        # each raised from the record's conversions (an HTTP 500 at every delivery), now defaulted
        ("GROUPID", 12345, "group_name", "GROUPID gives 12345"),
        ("DARKTIME", "", "dark_time", "dark_time"),
        ("MJD-BEG", 1e308, "obs_start", "obs_start"),
    ],
)
def test_an_unusable_value_takes_the_default_with_a_warning_as_rubin_does(key, value, field, words):
    raw = _with_card(generate_raw_ccd(SPEC), key, value)
    if key == "DATE-BEG":  # the translator falls back to DATE-OBS and the MJDs: those too
        for other in ("DATE-OBS", "MJD-OBS", "MJD-BEG"):
            raw = _with_card(raw, other, value)
    record = exposure_from_header(_primary(raw), DID, "raw/the-object")
    assert getattr(record, field) is None
    assert any(words in warning for warning in record.header_warnings)
    assert record.obs_id == "MC_O_20261122_000012"


@pytest.mark.parametrize(
    ("key", "field"), [("RASTART", "tracking_ra"), ("AZSTART", "azimuth"), ("ROTPA", "sky_angle")]
)
def test_a_value_with_no_finite_number_is_unknown(key, field):
    """RASTART = 1E999 gave a NaN tracking_ra, which the Butler's database keeps as NULL: its
    exposure record then differed from itself at every sync (a retriable Butler failure for the
    whole batch, for ever). No number is None, as a NaN was already for the time cards."""
    raw = generate_raw_ccd(SPEC)
    start = raw.index(key.encode().ljust(8) + b"= ")
    raw = raw[:start] + f"{key:<8}= {'1E999':>20}".ljust(80).encode() + raw[start + 80 :]
    record = exposure_from_header(_primary(raw), DID, "x")
    assert getattr(record, field) is None


def _escape(word: str) -> str:
    import re

    return re.escape(word)


def test_absent_keywords_fall_back_as_the_translator_defaults_do():
    raw = generate_raw_ccd(SPEC)
    for key in ("GROUPID", "FILTBAND", "DARKTIME", "DATE-END"):  # OBSID: the camera always writes
        start = raw.index(key.encode().ljust(8) + b"= ")
        raw = raw[:start] + b"COMMENT".ljust(80) + raw[start + 80 :]
    record = exposure_from_header(_primary(raw), DID, "x")
    assert record.obs_id == "MC_O_20261122_000012"
    assert record.group_name == "2026112200012"
    assert record.band == "r"
    assert record.dark_time == record.exposure_time == 30.001
    assert record.obs_start == START


def test_a_camera_header_in_tai_registers_the_utc_instant_37_seconds_earlier():
    """The camera's cards are TAI: the UTC instant is 37 s before the card's text. Headers the
    simulator wrote before (TIMESYS = 'UTC', still readable as written) meant UTC."""
    camera = exposure_from_header(_primary(generate_raw_ccd(SPEC)), DID, "x")
    assert camera.obs_start == START
    card = _primary(generate_raw_ccd(SPEC)).str_value("DATE-BEG")
    as_text = datetime.fromisoformat(card).replace(tzinfo=UTC)
    assert (as_text - camera.obs_start).total_seconds() == pytest.approx(37.0, abs=1e-3)
