"""Our RICE_1 coder (producers/compress/_rice.c) writes exactly the bytes CFITSIO's coder writes,
so everything that reads fpack output reads ours; funpack round trips are in test_compress."""

from __future__ import annotations

import numpy as np
import pytest
from astropy.io.fits.hdu.compressed._compression import compress_rice_1_c

from producers.compress import codec

pytestmark = pytest.mark.unit

_rng = np.random.default_rng(20261122)

CASES = {
    "one pixel": np.array([5], np.int32),
    "all zero (zero-block code)": np.zeros(100, np.int32),
    "full int32 range (raw blocks, wrapping differences)": _rng.integers(
        -(2**31), 2**31 - 1, 1000, dtype=np.int32
    ),
    "extremes alternating": np.array([0, 2**31 - 1, -(2**31), 0, 5, -7] * 20, np.int32),
    "tiny values, short last block": _rng.integers(0, 3, 77, dtype=np.int32),
    "sky-like amplifier": _rng.normal(1000, 5, 2048 * 576).astype(np.int32),
    "outliers (long unary codes)": (
        _rng.normal(0, 1, 4099) * np.where(_rng.random(4099) < 0.01, 1e6, 1)
    ).astype(np.int32),
    "ramp": np.arange(-5000, 5000, 3, dtype=np.int32),
}


def test_the_extension_is_built():
    """`make setup` builds it; without it the edge silently needs 2.5x the CPU per CCD."""
    assert codec.compress_be32 is not None


@pytest.mark.parametrize("name", list(CASES))
def test_same_bytes_as_cfitsio(name):
    pixels = CASES[name]
    expected = compress_rice_1_c(pixels.reshape(1, -1), codec.BLOCKSIZE, 4)
    assert codec.compress_be32(pixels.astype(">i4").tobytes(), codec.BLOCKSIZE) == expected


@pytest.mark.parametrize("blocksize", [16, 32, 64])
def test_other_block_sizes_match_too(blocksize):
    pixels = CASES["sky-like amplifier"][:10_000]
    expected = compress_rice_1_c(pixels.reshape(1, -1), blocksize, 4)
    assert codec.compress_be32(pixels.astype(">i4").tobytes(), blocksize) == expected


@pytest.mark.parametrize(("data", "blocksize"), [(b"", 32), (b"abc", 32), (b"abcd", 0)])
def test_bad_input_is_refused_clearly(data, blocksize):
    with pytest.raises(ValueError, match=r"pixels|blocksize"):
        codec.compress_be32(data, blocksize)
