"""Our RICE_1 coder (producers/compress/_rice.c) writes exactly the bytes CFITSIO's coder writes
for 16- and 32-bit pixels, so everything that reads fpack output reads ours; its decoder restores
them and refuses corrupt streams; its checksum is the FITS one. funpack round trips are in
test_compress and test_compress_cli."""

from __future__ import annotations

import numpy as np
import pytest
from astropy.io.fits.hdu.compressed._compression import compress_rice_1_c

from obsingest.fits import checksum_words
from producers.compress import _rice, tiled_rice

pytestmark = pytest.mark.unit

_rng = np.random.default_rng(20261122)


def _cases(dtype: type) -> dict[str, np.ndarray]:
    info = np.iinfo(dtype)
    big = 1e6 if info.bits == 32 else 1e4
    return {
        "one pixel": np.array([5], dtype),
        "all zero (zero-block code)": np.zeros(100, dtype),
        "full range (raw blocks, wrapping differences)": _rng.integers(info.min, info.max, 1000, dtype=dtype),
        "extremes alternating": np.array([0, info.max, info.min, 0, 5, -7] * 20, dtype),
        "tiny values, short last block": _rng.integers(0, 3, 77, dtype=dtype),
        "sky-like amplifier": _rng.normal(1000, 5, 2048 * 576).astype(dtype),
        "outliers (long unary codes)": (
            _rng.normal(0, 1, 4099) * np.where(_rng.random(4099) < 0.01, big, 1)
        ).astype(dtype),
        "ramp": np.arange(-5000, 5000, 3, dtype=dtype),
    }


CODERS = {np.int32: (_rice.compress_be32, 4), np.int16: (_rice.compress_be16, 2)}
CASES = [(dtype, name) for dtype in CODERS for name in _cases(dtype)]


def test_the_extension_is_built():
    """`make setup` builds it; the compressor has no other coder."""
    assert _rice.compress_be32 is tiled_rice._rice.compress_be32


@pytest.mark.parametrize(("dtype", "name"), CASES, ids=lambda v: getattr(v, "__name__", v))
def test_same_bytes_as_cfitsio(dtype, name):
    pixels = _cases(dtype)[name]
    coder, bytepix = CODERS[dtype]
    expected = compress_rice_1_c(pixels.reshape(1, -1), tiled_rice.BLOCKSIZE, bytepix)
    assert coder(pixels.astype(pixels.dtype.newbyteorder(">")).tobytes()) == expected


@pytest.mark.parametrize("blocksize", [16, 32, 64])
@pytest.mark.parametrize("dtype", list(CODERS), ids=lambda d: d.__name__)
def test_other_block_sizes_match_too(dtype, blocksize):
    pixels = _cases(dtype)["sky-like amplifier"][:10_000]
    coder, bytepix = CODERS[dtype]
    expected = compress_rice_1_c(pixels.reshape(1, -1), blocksize, bytepix)
    assert coder(pixels.astype(pixels.dtype.newbyteorder(">")).tobytes(), blocksize) == expected


@pytest.mark.parametrize(("data", "blocksize"), [(b"", 32), (b"abc", 32), (b"abcd", 0)])
def test_bad_input_is_refused_clearly(data, blocksize):
    with pytest.raises(ValueError, match=r"pixels|blocksize"):
        _rice.compress_be32(data, blocksize)


def _image(dtype: type, shape: tuple[int, int]) -> np.ndarray:
    return _rng.normal(3000, 40, shape).astype(dtype)


TILINGS = [(37, 50), (37, 1), (10, 7), (1, 1), (36, 49), (37, 13)]


@pytest.mark.parametrize("tile", TILINGS, ids=str)
@pytest.mark.parametrize("dtype", list(CODERS), ids=lambda d: d.__name__)
def test_pack_image_is_cfitsios_coder_per_tile_and_unpack_restores(dtype, tile):
    image = _image(dtype, (50, 37))  # rows, columns
    bytepix = CODERS[dtype][1]
    data = b"head" + image.astype(image.dtype.newbyteorder(">")).tobytes()
    table, heap, longest = _rice.pack_image(data, 4, bytepix, 37, 50, *tile)
    descriptors = np.frombuffer(table, ">i4").reshape(-1, 2)
    cols, rows = tile
    expected = [
        compress_rice_1_c(np.ascontiguousarray(image[r : r + rows, c : c + cols]), 32, bytepix)
        for r in range(0, 50, rows)
        for c in range(0, 37, cols)
    ]
    assert [heap[o : o + n] for n, o in descriptors.tolist()] == expected
    assert longest == max(len(t) for t in expected)
    offsets = np.concatenate([[0], np.cumsum(descriptors[:-1, 0])])
    assert list(descriptors[:, 1]) == list(offsets)  # tiles back to back in the heap
    table_at = 3
    buf = b"xyz" + table + heap
    restored = _rice.unpack_image(buf, table_at, 8, table_at + len(table), len(heap), bytepix, 37, 50, *tile)
    assert restored == data[4:]


def test_pack_image_checks_its_arguments():
    data = bytes(4 * 10 * 10)
    with pytest.raises(ValueError, match="outside"):
        _rice.pack_image(data, 8, 4, 10, 10, 10, 10)
    with pytest.raises(ValueError, match="bad tiling"):
        _rice.pack_image(data, 0, 4, 10, 10, 11, 1)
    with pytest.raises(ValueError, match="bytepix"):
        _rice.pack_image(data, 0, 8, 10, 5, 10, 1)


@pytest.mark.parametrize("dtype", list(CODERS), ids=lambda d: d.__name__)
def test_unpack_image_refuses_corrupt_streams_naming_the_tile(dtype):
    image = _image(dtype, (20, 30))
    bytepix = CODERS[dtype][1]
    data = image.astype(image.dtype.newbyteorder(">")).tobytes()
    table, heap, _ = _rice.pack_image(data, 0, bytepix, 30, 20, 30, 5)

    def unpack(table: bytes, heap: bytes) -> bytes:
        return _rice.unpack_image(table + heap, 0, 8, len(table), len(heap), bytepix, 30, 20, 30, 5)

    assert unpack(table, heap) == data
    descriptors = np.frombuffer(table, ">i4").reshape(-1, 2).copy()
    short = descriptors.copy()
    short[2, 0] = 5  # tile 2 claims fewer bytes than it needs
    with pytest.raises(ValueError, match="tile 2 runs past the end of its data"):
        unpack(short.astype(">i4").tobytes(), heap)
    outside = descriptors.copy()
    outside[3, 1] = len(heap)  # tile 3 starts at the end of the heap
    with pytest.raises(ValueError, match="tile 3 has a descriptor outside the heap"):
        unpack(outside.astype(">i4").tobytes(), heap)
    with pytest.raises(ValueError, match="outside the data"):
        _rice.unpack_image(table, 0, 8, len(table), 10**6, bytepix, 30, 20, 30, 5)
    noise = _rng.integers(0, 256, len(heap), dtype=np.uint8).tobytes()
    try:  # random bytes: either refused, or decoded to *some* pixels, never a crash
        unpack(table, noise)
    except ValueError as exc:
        assert str(exc).startswith("tile ")


def test_invalid_split_code_is_refused():
    # first pixel (32 bits), then split code 31 (5 bits): no coder writes fs = 30
    stream = bytes([0, 0, 0, 0, 0b11111000, 0, 0, 0])
    table = np.array([[len(stream), 0]], ">i4").tobytes()
    with pytest.raises(ValueError, match="invalid split code"):
        _rice.unpack_image(table + stream, 0, 8, 8, len(stream), 4, 4, 1, 4, 1)


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 100, 2880, 12345])
def test_checksum_is_the_fits_checksum(size):
    data = _rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    assert _rice.checksum(data) == checksum_words(data)
    assert _rice.checksum(data, 0xFFFF0000) == checksum_words(data, 0xFFFF0000)
    ones = b"\xff" * 4000  # carries folded back in, as the convention says
    assert _rice.checksum(ones) == checksum_words(ones)


def test_same_bytes():
    assert _rice.same_bytes(b"abc", memoryview(b"xabc")[1:])
    assert not _rice.same_bytes(b"abc", b"abd")
    assert not _rice.same_bytes(b"abc", b"ab")
