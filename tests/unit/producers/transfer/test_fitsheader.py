"""Per-exposure identity of cached CCD files: cards rewritten, FITS checksum still valid."""

from __future__ import annotations

import io
import warnings
from datetime import UTC, datetime

import pytest
from astropy.io import fits

from obsingest.dataid import DataId, identity_cards, identity_from_header
from obsingest.fits import encode_checksum, make_card, parse_primary
from producers.compress import compress_fits, decompress_fits
from producers.daq.simulator import CcdSpec, generate_raw_ccd
from producers.transfer.fitsheader import retarget_primary_header

pytestmark = pytest.mark.unit

SPEC = CcdSpec("LSSTCam", 2026112200012, 7, 20261122, datetime(2026, 11, 23, tzinfo=UTC), 30.0, "r", "small")


@pytest.fixture(scope="module")
def raw() -> bytes:
    return generate_raw_ccd(SPEC)


def _primary(data: bytes) -> fits.Header:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(io.BytesIO(data), checksum=True) as hdus:
            assert all(h.verify_checksum() == 1 for h in hdus if "CHECKSUM" in h.header)
            return hdus[0].header.copy()


def exposure_cards(exposure: int, detector: int, instrument: str = "LSSTCam") -> dict[str, int | str]:
    """The cards staging writes: the identity cards of that CCD."""
    return identity_cards(DataId(instrument, exposure, detector).identity())


def test_exposure_cards_follow_the_camera_convention():
    cards = exposure_cards(2026112300077, 7)
    assert {k: cards[k] for k in ("SEQNUM", "DAYOBS", "OBSID", "FILENAME")} == {
        "SEQNUM": 77,
        "DAYOBS": "20261123",
        "OBSID": "MC_O_20261123_000077",
        "FILENAME": "MC_O_20261123_000077_R01_S21.fits",
    }
    assert exposure_cards(2026112300077, 0, "LATISS")["FILENAME"] == ("AT_O_20261123_000077_R00_S00.fits")


def test_raw_file_gets_the_new_exposure(raw):
    buf = bytearray(raw)
    retarget_primary_header(buf, exposure_cards(2026112300077, 7))
    header = _primary(bytes(buf))
    assert "EXPID" not in header
    assert header["SEQNUM"] == 77
    assert header["OBSID"] == "MC_O_20261123_000077"
    assert (header["RAFTBAY"], header["CCDSLOT"]) == ("R01", "S21")
    assert header.comments["SEQNUM"] == "sequence number within the day"
    identity = identity_from_header(parse_primary(bytes(buf)).str_value, "retargeted")
    assert identity.data_id == DataId("LSSTCam", 2026112300077, 7)
    assert identity.file_name == header["FILENAME"]
    assert len(buf) == len(raw)
    assert buf[2880 * 4 :] == raw[2880 * 4 :]


def test_compressed_file_keeps_a_valid_checksum_and_pixels(raw):
    fz = compress_fits(raw, threads=1)
    buf = bytearray(fz)
    retarget_primary_header(buf, exposure_cards(2026112300078, 7))
    assert bytes(buf) != fz
    header = _primary(bytes(buf))
    assert header["OBSID"] == "MC_O_20261123_000078"
    restored = decompress_fits(bytes(buf))
    assert restored[2880 * 4 :] == raw[2880 * 4 :]


def test_retargeting_back_restores_the_original_bytes(raw):
    fz = compress_fits(raw, threads=1)
    buf = bytearray(fz)
    retarget_primary_header(buf, exposure_cards(2026112300079, 7))
    retarget_primary_header(buf, exposure_cards(SPEC.exposure, 7))
    assert bytes(buf) == fz


def test_missing_card_is_an_error(raw):
    with pytest.raises(KeyError):
        retarget_primary_header(bytearray(raw), {"NOSUCH": 1})


def test_not_fits_is_an_error():
    with pytest.raises(ValueError):
        retarget_primary_header(bytearray(b" " * 2880), {"EXPID": 1})


@pytest.mark.parametrize("value", [0, 1, 0xFFFFFFFF, 0x12345678, 0xDEADBEEF])
def test_checksum_encoding_uses_only_alphanumerics(value):
    text = encode_checksum(value)
    assert len(text) == 16
    assert text.isalnum()


def test_format_card_is_fixed_width():
    card = make_card("EXPID", 2026112300077, "exposure id")
    assert len(card) == 80
    assert card.decode().startswith("EXPID   =        2026112300077 / exposure id")
    assert make_card("OBSID", "MC_O_1").decode().startswith("OBSID   = 'MC_O_1  '")
