"""Tiled Rice compression of raw CCDs into fpack-compatible ``.fits.fz``, amplifiers in parallel.

Light on purpose (the standard library, the C coder and ``obsingest.fits``; no numpy, no astropy:
``python -X importtime``): ``obsingest compress`` / ``python -m producers.compress`` (``fpack_cli``)
import this package and must start in tens of milliseconds.
"""

from producers.compress.restore import decompress_fits
from producers.compress.tiled_rice import CompressionResult, compress_file, compress_fits

__all__ = ["CompressionResult", "compress_file", "compress_fits", "decompress_fits"]
