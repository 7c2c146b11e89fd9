"""The compressor's numpy-free FITS reader (producers/compress/structure.py) reads what the
kernel's reader (obsingest/fits.py) reads, refuses what it refuses with the same message, and
adds the CFITSIO status fpack exits with for each fault."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest
from astropy.io import fits

from obsingest import fits as kernel
from obsingest.errors import CorruptFile
from producers.compress import structure
from producers.daq.simulator import CcdSpec, generate_raw_ccd

pytestmark = pytest.mark.unit

SPEC = CcdSpec(
    instrument="LSSTCam",
    exposure=2026112200012,
    detector=94,
    day_obs=20261122,
    obs_start=datetime(2026, 11, 23, 3, 4, 5, tzinfo=UTC),
    exposure_time=30.0,
    filter="r",
    size="small",
    seed=1,
)


@pytest.fixture(scope="module")
def raw() -> bytes:
    return generate_raw_ccd(SPEC)


def _mixed() -> bytes:
    rng = np.random.default_rng(0)
    hdus = fits.HDUList(
        [
            fits.PrimaryHDU(rng.integers(-500, 500, (40, 30), dtype=np.int16)),
            fits.BinTableHDU.from_columns([fits.Column("x", "J", array=np.arange(5))]),
            fits.ImageHDU(rng.normal(size=(4, 5)).astype(np.float32), name="FLOAT'S"),
            fits.ImageHDU(np.zeros((2, 3, 4), np.int32), name="CUBE"),
        ]
    )
    hdus[0].header["OBJECT"] = "it''s"
    buf = io.BytesIO()
    hdus.writeto(buf, checksum=True)
    return buf.getvalue() + b"\0" * 2880  # a trailing blank block is allowed


def _set_value(raw: bytes, key: str, value: str, after: int = 11520) -> bytes:
    at = raw.index(key.ljust(8).encode() + b"= ", after)
    return raw[:at] + f"{key:<8}= {value:>20}".ljust(80).encode() + raw[at + 80 :]


def _drop_card(raw: bytes, key: str) -> bytes:
    at = raw.index(key.ljust(8).encode() + b"= ", 11520)
    return raw[:at] + b"COMMENT card removed".ljust(80) + raw[at + 80 :]


@pytest.mark.parametrize("which", ["ccd", "mixed"])
def test_same_structure_as_the_kernel_reader(raw, which) -> None:
    data = raw if which == "ccd" else _mixed()
    ours, theirs = structure.parse(data), kernel.parse_fits(data)
    assert [(h.index, h.cards, h.data_offset, h.data_size) for h in ours] == [
        (h.index, h.cards, h.data_offset, h.data_size) for h in theirs
    ]
    for a, b in zip(ours, theirs, strict=True):
        for key in ("XTENSION", "EXTNAME", "OBJECT", "BITPIX", "NAXIS", "CHECKSUM", "NOPE"):
            assert a.value(key) == b.value(key)
            assert a.str_value(key) == b.str_value(key)
        assert a.shape == b.shape


FAULTS = [
    pytest.param(lambda raw: b"", 107, "empty", id="empty"),
    pytest.param(lambda raw: b"GARBAGE" * 1000, 252, "not a FITS file", id="not FITS"),
    pytest.param(lambda raw: b"GARBAGE" * 10, 108, "not a FITS file", id="short, not FITS"),
    pytest.param(lambda raw: raw[:2000], 108, "truncated", id="shorter than a block"),
    pytest.param(lambda raw: raw + b"x" * 100, 107, "truncated", id="partial block"),
    pytest.param(lambda raw: raw[: len(raw) // 2], 107, "truncated", id="truncated data"),
    pytest.param(lambda raw: raw[:2880], 107, "no END card", id="truncated header"),
    pytest.param(lambda raw: raw[:2880] + b"bad key = 1".ljust(80) + raw[2960:], 207,
                 "invalid header card", id="bad card"),
    pytest.param(lambda raw: _set_value(raw, "BITPIX", "33"), 211, "invalid BITPIX",
                 id="bad BITPIX"),
    pytest.param(lambda raw: _set_value(raw, "BITPIX", "T"), 211, "not an integer",
                 id="BITPIX not int"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS", "1000"), 212, "invalid NAXIS",
                 id="bad NAXIS"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS1", "3.5"), 213, "not an integer",
                 id="NAXIS1 not int"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS2", "-4"), 213, "negative axis",
                 id="negative axis"),
    pytest.param(lambda raw: _set_value(raw, "PCOUNT", "x"), 214, "not an integer",
                 id="PCOUNT not int"),
    pytest.param(lambda raw: _drop_card(raw, "NAXIS2"), 202, "missing required keyword NAXIS2",
                 id="missing NAXIS2"),
    pytest.param(lambda raw: raw[:11520] + b"\x00" * 2880 + raw[14400:], 252, "XTENSION",
                 id="no XTENSION"),
    pytest.param(lambda raw: raw + b"x" * 2880, 252, "XTENSION", id="trailing garbage"),
]


@pytest.mark.parametrize(("mangle", "status", "reason"), FAULTS)
def test_faults_same_message_as_the_kernel_reader_with_fpacks_status(
    raw, mangle, status, reason
) -> None:
    bad = mangle(raw)
    with pytest.raises(CorruptFile, match=reason) as theirs:
        kernel.parse_fits(bad)
    with pytest.raises(structure.FitsFormatError) as ours:
        structure.parse(bad)
    assert str(ours.value) == str(theirs.value)
    assert ours.value.status == status
    assert ours.value.reason == "corrupt-file" and not ours.value.retriable
    assert status in structure.STATUS_TEXT


def test_cards_and_checksum_encoding_match_the_kernel() -> None:
    for key, value, comment in [("A", 1, "x"), ("LONGKEY8", True, ""), ("S", "it's", "c" * 90)]:
        assert structure.make_card(key, value, comment) == kernel.make_card(key, value, comment)
    cards = [structure.make_card("SIMPLE", True), structure.make_card("NAXIS", 0)]
    assert structure.header_bytes(cards) == kernel.header_bytes(cards)
    assert structure.rename_card(cards[1], "ZNAXIS") == kernel.rename_card(cards[1], "ZNAXIS")
    for value in (0, 1, 0xFFFFFFFF, 0x12345678, 0x3A5B3A5B, 0xDEADBEEF):
        assert structure.encode_checksum(value) == kernel.encode_checksum(value)
