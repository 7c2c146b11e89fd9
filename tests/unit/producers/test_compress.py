"""Compression: funpack restores bit-identical pixels and headers; astropy and fitsio read it;
size matches fpack; bad input raises CorruptFile naming the reason."""

from __future__ import annotations

import io
import shutil
import subprocess
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import fitsio
import numpy as np
import pytest
from astropy.io import fits

from obsingest.errors import CorruptFile
from obsingest.fits import padded, parse_fits
from obsingest_cli.main import main as cli_main
from producers.compress import compress_file, compress_fits, decompress_fits
from producers.compress.restore import verify_plan
from producers.daq.simulator import CcdSpec, generate_raw_ccd

pytestmark = pytest.mark.unit

needs_fpack = pytest.mark.skipif(
    not (shutil.which("fpack") and shutil.which("funpack")),
    reason="fpack/funpack (Debian libcfitsio-bin) not installed; `make setup` installs it",
)

SPEC = CcdSpec(
    instrument="LSSTComCam",
    exposure=2026112200012,
    detector=4,
    day_obs=20261122,
    obs_start=datetime(2026, 11, 23, 3, 4, 5, tzinfo=UTC),
    exposure_time=30.0,
    filter="i",
    size="small",
    seed=3,
)
IGNORED_KEYS = {"CHECKSUM", "DATASUM"}


@pytest.fixture(scope="module")
def small_raw() -> bytes:
    return generate_raw_ccd(SPEC)


@pytest.fixture(scope="module")
def full_raw() -> bytes:
    return generate_raw_ccd(replace(SPEC, size="full"))


def _read(data: bytes | Path) -> fits.HDUList:
    src = io.BytesIO(data) if isinstance(data, bytes) else data
    return fits.open(src)


def _cards(header: fits.Header) -> list[tuple[str, object, str]]:
    """Cards that matter: blank cards and checksums (rewritten by every tool) left out."""
    return [
        (c.keyword, c.value, c.comment)
        for c in header.cards
        if c.keyword not in IGNORED_KEYS and c.image.strip()
    ]


def _assert_same_fits(original: bytes, restored: bytes | Path) -> None:
    """Bit-identical pixels (numpy) and identical header cards, HDU by HDU."""
    with _read(original) as a, _read(restored) as b:
        assert len(a) == len(b)
        for ha, hb in zip(a, b, strict=True):
            assert _cards(ha.header) == _cards(hb.header)
            if ha.data is None:
                assert hb.data is None
            else:
                assert ha.data.dtype.newbyteorder("=") == hb.data.dtype.newbyteorder("=")
                np.testing.assert_array_equal(ha.data, hb.data)


def _funpack(fz: bytes, tmp_path: Path) -> Path:
    src = tmp_path / "in.fits.fz"
    out = tmp_path / "out.fits"
    src.write_bytes(fz)
    out.unlink(missing_ok=True)
    subprocess.run(["funpack", "-O", str(out), str(src)], check=True, capture_output=True)
    return out


def _fpack(raw: bytes, tmp_path: Path) -> bytes:
    src = tmp_path / "raw.fits"
    out = tmp_path / "raw.fits.fz"
    src.write_bytes(raw)
    out.unlink(missing_ok=True)
    subprocess.run(["fpack", "-O", str(out), str(src)], check=True, capture_output=True)
    return out.read_bytes()


@needs_fpack
@pytest.mark.parametrize("tile_rows", [None, 1, 7, 64])
@pytest.mark.parametrize("threads", [1, 2])
def test_funpack_restores_bit_identical(small_raw, tmp_path, tile_rows, threads) -> None:
    fz = compress_fits(small_raw, threads=threads, tile_rows=tile_rows)
    _assert_same_fits(small_raw, _funpack(fz, tmp_path))


@needs_fpack
def test_full_ccd_funpack_round_trip_and_size_matches_fpack(full_raw, tmp_path) -> None:
    fz = compress_fits(full_raw, threads=2)
    _assert_same_fits(full_raw, _funpack(fz, tmp_path))
    reference = _fpack(full_raw, tmp_path)
    assert len(fz) <= 1.01 * len(reference)
    # fpack's own tiling (one row per tile) gives fpack's size: the same Rice coder
    rows = compress_fits(full_raw, threads=2, tile_rows=1)
    assert abs(len(rows) - len(reference)) <= 0.001 * len(reference)


def test_round_trip_through_our_decompressor_is_byte_identical(small_raw) -> None:
    assert decompress_fits(compress_fits(small_raw)) == small_raw
    assert decompress_fits(compress_fits(small_raw, tile_rows=5)) == small_raw


@needs_fpack
def test_we_decompress_fpack_output(small_raw, tmp_path) -> None:
    # not byte-identical: CFITSIO drops the primary header's trailing blank cards
    _assert_same_fits(small_raw, decompress_fits(_fpack(small_raw, tmp_path)))


def test_output_is_deterministic_and_thread_count_independent(small_raw, tmp_path) -> None:
    one = compress_fits(small_raw, threads=1)
    assert compress_fits(small_raw, threads=2) == one
    assert compress_fits(small_raw, threads=4) == one
    path = tmp_path / "raw.fits"
    path.write_bytes(small_raw)
    assert compress_fits(path) == one


def test_astropy_reads_it_with_valid_checksums(small_raw) -> None:
    fz = compress_fits(small_raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(io.BytesIO(fz), checksum=True, disable_image_compression=True) as raw:
            for hdu in raw:
                _ = hdu.data  # checksum verification happens on read
            assert raw[1].header["ZCMPTYPE"] == "RICE_1"
            assert raw[1].header["ZTILE2"] == 64  # whole amplifier per tile
    _assert_same_fits(small_raw, fz)


def test_fitsio_reads_it(small_raw, tmp_path) -> None:
    path = tmp_path / "ccd.fits.fz"
    path.write_bytes(compress_fits(small_raw))
    with fitsio.FITS(str(path)) as f, fits.open(io.BytesIO(small_raw)) as ref:
        assert f[0].read_header()["OBSID"] == "CC_O_20261122_000012"
        assert len(f) == 17
        for i in range(1, 17):
            assert f[i].get_extname() == ref[i].header["EXTNAME"]
            np.testing.assert_array_equal(f[i].read(), ref[i].data)


@needs_fpack
def test_primary_image_and_table_hdus(tmp_path) -> None:
    """A primary image moves to extension 1 (as fpack does); tables and floats are copied."""
    rng = np.random.default_rng(0)
    hdus = fits.HDUList(
        [
            fits.PrimaryHDU(rng.integers(-500, 500, (40, 30), dtype=np.int16)),
            fits.BinTableHDU.from_columns([fits.Column("x", "J", array=np.arange(5))]),
            fits.ImageHDU(rng.normal(size=(4, 5)).astype(np.float32), name="FLOAT"),
            fits.ImageHDU(rng.integers(0, 9, 17, dtype=np.int32), name="ONED"),
            fits.ImageHDU(  # incompressible: full-range noise must still round-trip
                rng.integers(-(2**31), 2**31 - 1, (33, 70), dtype=np.int32), name="NOISE"
            ),
        ]
    )
    hdus[0].header["OBJECT"] = "test"
    buf = io.BytesIO()
    hdus.writeto(buf)
    raw = buf.getvalue()
    fz = compress_fits(raw)
    with fits.open(io.BytesIO(fz), disable_image_compression=True) as packed:
        assert packed[0].data is None
        assert packed[1].header["ZSIMPLE"] is True
    _assert_same_fits(raw, _funpack(fz, tmp_path))
    assert decompress_fits(fz) == raw


def test_astropy_rice_codec_contract() -> None:
    """Pin the astropy internal we call: contiguous int32 ndarray in, same bytes as from bytes."""
    from astropy.io.fits.hdu.compressed._compression import compress_rice_1_c, decompress_rice_1_c

    tile = np.random.default_rng(1).normal(5000, 15, (8, 576)).astype("=i4")
    packed = compress_rice_1_c(tile, 32, 4)
    assert packed == compress_rice_1_c(tile.tobytes(), 32, 4)
    restored = np.frombuffer(decompress_rice_1_c(packed, 32, 4, tile.size), dtype="=i4")
    np.testing.assert_array_equal(restored.reshape(tile.shape), tile)


def _set_value(raw: bytes, key: str, value: str) -> bytes:
    """Overwrite the value of the first ``key`` card after the primary header."""
    at = raw.index(key.ljust(8).encode() + b"= ", 11520)
    return raw[:at] + f"{key:<8}= {value:>20}".ljust(80).encode() + raw[at + 80 :]


def _truncate_mid_data(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda raw: b"", "empty"),
        (lambda raw: b"GARBAGE" * 1000, "not a FITS file"),
        (_truncate_mid_data, "truncated"),
        (lambda raw: raw[:2000], "truncated"),
        (lambda raw: raw[:2880] + b"bad key = 1".ljust(80) + raw[2960:], "invalid header card"),
        (lambda raw: _set_value(raw, "BITPIX", "33"), "invalid BITPIX"),
        (lambda raw: _set_value(raw, "NAXIS1", "3.5"), "not an integer"),
        (lambda raw: raw[:11520] + b"\x00" * 2880 + raw[14400:], "XTENSION"),
    ],
)
def test_corrupt_input_raises_corrupt_file(small_raw, mangle, reason) -> None:
    with pytest.raises(CorruptFile, match=reason):
        compress_fits(mangle(small_raw))


def test_corrupt_compressed_file_raises_corrupt_file(small_raw) -> None:
    fz = compress_fits(small_raw)
    with pytest.raises(CorruptFile, match="truncated"):
        decompress_fits(fz[: len(fz) - 5000])
    with fits.open(io.BytesIO(fz), disable_image_compression=True) as packed:
        heap_start = packed[1]._data_offset + 8
    garbled = bytearray(fz)
    garbled[heap_start : heap_start + 64] = b"\xff" * 64
    with pytest.raises(CorruptFile):
        decompress_fits(bytes(garbled))


def test_missing_input_file_raises_corrupt_file(tmp_path) -> None:
    with pytest.raises(CorruptFile, match="does not exist"):
        compress_fits(tmp_path / "nope.fits")


def test_compress_file_reports_sizes(small_raw, tmp_path) -> None:
    src = tmp_path / "raw.fits"
    src.write_bytes(small_raw)
    result = compress_file(src, tmp_path / "raw.fits.fz", threads=2)
    assert result.raw_bytes == len(small_raw)
    assert result.compressed_bytes == (tmp_path / "raw.fits.fz").stat().st_size
    assert result.seconds > 0 and result.ratio > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.fits", "raw.fits.fz"]


def test_cli_daq_then_compress(tmp_path, capsys) -> None:
    raw = tmp_path / "raw.fits"
    out = tmp_path / "raw.fits.fz"
    args = ["daq", "write", "--instrument", "LSSTComCam", "--exposure", "2026112200012"]
    args += ["--detector", "4", "--size", "small", "--obs-start", "2026-11-23T03:04:05+00:00"]
    assert cli_main([*args, str(raw)]) == 0
    assert cli_main(["compress", "--threads", "2", "-v", str(raw)]) == 0
    assert capsys.readouterr().out.endswith(f"{raw} -> {out}\n")
    assert decompress_fits(out.read_bytes()) == raw.read_bytes()
    bad = tmp_path / "bad.fits"
    bad.write_bytes(raw.read_bytes()[:5000])
    assert cli_main(["compress", str(bad)]) == 107  # CFITSIO's END_OF_FILE, as fpack exits
    assert "truncated" in capsys.readouterr().err
    assert not (tmp_path / "bad.fits.fz").exists()


@needs_fpack
@pytest.mark.parametrize("tile", ["20,7", "1000,1000", "5"])  # narrower; larger than the image
def test_we_decompress_fpack_tilings(small_raw, tmp_path, tile) -> None:
    src = tmp_path / "raw.fits"
    src.write_bytes(small_raw)
    subprocess.run(["fpack", "-t", tile, "-O", str(tmp_path / "t.fz"), str(src)], check=True)
    _assert_same_fits(small_raw, decompress_fits((tmp_path / "t.fz").read_bytes()))


def _verify(fz: bytes, raw: bytes) -> None:
    hdus = parse_fits(memoryview(raw))
    for job in verify_plan(memoryview(fz), memoryview(raw), hdus):
        job()


def test_verify_plan_accepts_our_output_and_catches_every_corruption(small_raw) -> None:
    fz = compress_fits(small_raw)
    _verify(fz, small_raw)
    _verify(compress_fits(small_raw, tile_rows=3, checksum=False), small_raw)
    with fits.open(io.BytesIO(fz), disable_image_compression=True) as packed:
        heap = packed[2]._data_offset + 8 * packed[2].header["NAXIS2"]
    flipped = bytearray(fz)
    flipped[heap + 20] ^= 0x10
    with pytest.raises(CorruptFile, match="CHECKSUM does not match"):
        _verify(bytes(flipped), small_raw)
    unchecked = bytearray(compress_fits(small_raw, checksum=False))
    unchecked[heap + 20] ^= 0x10
    with pytest.raises(CorruptFile, match=r"(data differ|does not decode)"):
        _verify(bytes(unchecked), small_raw)
    other = bytearray(small_raw)
    other[parse_fits(small_raw)[16].data_offset + 10] ^= 1  # the written file does not restore it
    with pytest.raises(CorruptFile, match="data differ from input HDU 16"):
        _verify(fz, bytes(other))
    second = parse_fits(fz)[1]
    with pytest.raises(CorruptFile, match="written file has 2 HDUs, expected 17"):
        _verify(fz[: second.data_offset + padded(second.data_size)], small_raw)
