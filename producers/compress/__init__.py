"""Tiled Rice compression of raw CCDs into fpack-compatible ``.fits.fz``, amplifiers in parallel."""

from producers.compress.codec import (
    CompressionResult,
    compress_file,
    compress_fits,
    decompress_fits,
)

__all__ = ["CompressionResult", "compress_file", "compress_fits", "decompress_fits"]
