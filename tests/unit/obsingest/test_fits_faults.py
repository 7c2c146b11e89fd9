"""The FITS reader (obsingest/fits.py) reads real files, and refuses every way the bytes can be
wrong with a message naming the fault and the CFITSIO status fpack exits with for it (so
``obsingest compress`` exits as fpack does). It must not load numpy: it is on the start-up path
of the fpack drop-in."""

from __future__ import annotations

import io
import pickle
from datetime import UTC, datetime

import numpy as np
import pytest
from astropy.io import fits

from obsingest import fits as kernel
from obsingest.errors import CorruptFile
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
def test_reads_every_hdu_of_real_files(raw, which) -> None:
    data = raw if which == "ccd" else _mixed()
    ours = kernel.parse_fits(data)
    theirs = fits.open(io.BytesIO(data))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.int_value("BITPIX") == b.header["BITPIX"]
        assert a.shape == tuple(b.header.get(f"NAXIS{i}") for i in range(1, b.header["NAXIS"] + 1))
        assert a.str_value("EXTNAME") == b.header.get("EXTNAME")
        assert a.str_value("OBJECT") == b.header.get("OBJECT")


def test_the_reader_does_not_load_numpy() -> None:
    import subprocess
    import sys

    code = "import sys, obsingest.fits; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


FAULTS = [
    pytest.param(lambda raw: b"", 107, "empty", id="empty"),
    pytest.param(lambda raw: b"GARBAGE" * 1000, 252, "not a FITS file", id="not FITS"),
    pytest.param(lambda raw: b"GARBAGE" * 10, 108, "not a FITS file", id="short, not FITS"),
    pytest.param(lambda raw: raw[:2000], 108, "truncated", id="shorter than a block"),
    pytest.param(lambda raw: raw + b"x" * 100, 107, "truncated", id="partial block"),
    pytest.param(lambda raw: raw[: len(raw) // 2], 107, "truncated", id="truncated data"),
    pytest.param(lambda raw: raw[:2880], 107, "no END card", id="truncated header"),
    pytest.param(
        lambda raw: raw[:2880] + b"bad key = 1".ljust(80) + raw[2960:],
        207,
        "invalid header card",
        id="bad card",
    ),
    pytest.param(lambda raw: _set_value(raw, "BITPIX", "33"), 211, "invalid BITPIX", id="bad BITPIX"),
    pytest.param(lambda raw: _set_value(raw, "BITPIX", "T"), 211, "not an integer", id="BITPIX not int"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS", "1000"), 212, "invalid NAXIS", id="bad NAXIS"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS1", "3.5"), 213, "not an integer", id="NAXIS1 not int"),
    pytest.param(lambda raw: _set_value(raw, "NAXIS2", "-4"), 213, "negative axis", id="negative axis"),
    pytest.param(lambda raw: _set_value(raw, "PCOUNT", "x"), 214, "not an integer", id="PCOUNT not int"),
    pytest.param(
        lambda raw: _set_value(raw, "PCOUNT", "-2880"), 214, "invalid PCOUNT -2880", id="negative PCOUNT"
    ),
    pytest.param(lambda raw: _set_value(raw, "GCOUNT", "-1"), 215, "invalid GCOUNT -1", id="negative GCOUNT"),
    pytest.param(
        lambda raw: _drop_card(raw, "NAXIS2"), 202, "missing required keyword NAXIS2", id="missing NAXIS2"
    ),
    pytest.param(lambda raw: raw[:11520] + b"\x00" * 2880 + raw[14400:], 252, "XTENSION", id="no XTENSION"),
    pytest.param(lambda raw: raw + b"x" * 2880, 252, "XTENSION", id="trailing garbage"),
]


@pytest.mark.parametrize(("mangle", "status", "reason"), FAULTS)
def test_every_fault_names_its_reason_and_fpacks_status(raw, mangle, status, reason) -> None:
    with pytest.raises(kernel.FitsFormatError, match=reason) as info:
        kernel.parse_fits(mangle(raw))
    assert isinstance(info.value, CorruptFile)
    assert info.value.status == status
    assert info.value.reason == "corrupt-file" and not info.value.retriable
    assert status in kernel.STATUS_TEXT
    again = pickle.loads(pickle.dumps(info.value))
    assert (type(again), str(again), again.status) == (type(info.value), str(info.value), status)


@pytest.mark.parametrize(("mangle", "status", "reason"), FAULTS)
def test_the_primary_header_check_refuses_every_fault_as_the_full_parse(raw, mangle, status, reason) -> None:
    """``primary_header`` (the register function's check) walks every HDU as cheaply as it
    can, but a bad file gets the very error ``parse_fits`` gives."""
    data = mangle(raw)
    with pytest.raises(kernel.FitsFormatError) as full:
        kernel.parse_fits(data)
    with pytest.raises(kernel.FitsFormatError, match=reason) as info:
        kernel.primary_header(data)
    assert (str(info.value), info.value.status) == (str(full.value), full.value.status)
    assert info.value.status == status


@pytest.mark.parametrize("which", ["ccd", "compressed", "mixed", "reordered", "blank tail"])
def test_the_primary_header_check_reads_what_the_full_parse_reads(raw, which) -> None:
    from producers.compress import compress_fits

    data = {
        "ccd": lambda: raw,
        "compressed": lambda: compress_fits(raw, threads=1),
        "mixed": _mixed,
        "reordered": lambda: _reordered(raw),
        "blank tail": lambda: raw + b" " * 2880,
    }[which]()
    full = kernel.parse_fits(data)
    primary = kernel.primary_header(data)
    assert primary == full[0]
    assert primary.keywords == full[0].keywords
    assert kernel._walk(data) is not None  # taken by the cheap walk, not the fallback


def _reordered(raw: bytes) -> bytes:
    """Still valid, not laid out as writers do: in the first extension PCOUNT and GCOUNT come
    after a card that is not a sizing one, and a later repeat of NAXIS1 (which must not
    count: the first card of a keyword does) holds a nonsense value."""
    start = raw.index(b"XTENSION= ", 2880)
    cards = [raw[i : i + 80] for i in range(start, start + 2880, 80)]
    p = next(i for i, c in enumerate(cards) if c.startswith(b"PCOUNT  = "))
    assert cards[p + 1].startswith(b"GCOUNT  = ")
    sizing = cards[p : p + 2]
    other = cards[p + 2]
    assert not other.startswith((b"END ", b"        "))
    decoy = b"NAXIS1  =                   -7 / a later repeat: ignored".ljust(80)
    cards[p : p + 3] = [other, *sizing]
    end = next(i for i, c in enumerate(cards) if c == kernel.END_CARD)
    assert end + 1 < len(cards), "room for one more card in the block"
    cards[end : end + 2] = [decoy, kernel.END_CARD]
    return raw[:start] + b"".join(cards) + raw[start + 2880 :]
