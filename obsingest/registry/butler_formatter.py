"""A Butler formatter for raws where the science pipelines' one (obs_lsst, not on PyPI) is not
installed: ``butler.get`` returns an ``astropy.io.fits.HDUList`` (storage class
``RAW_FITS_STORAGE_CLASS``). docs/butler.md says which formatter a repository gets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from lsst.daf.butler import FormatterV2


class RawFitsFormatter(FormatterV2):
    """Reads a (compressed) raw FITS file into an in-memory ``astropy.io.fits.HDUList``."""

    default_extension: ClassVar[str] = ".fits.fz"
    supported_extensions: ClassVar[frozenset[str]] = frozenset({".fits", ".fits.fz", ".fz"})
    can_read_from_local_file: ClassVar[bool] = True

    def read_from_local_file(self, path: str, component: str | None = None, expected_size: int = -1) -> Any:
        from astropy.io import fits

        hdus = fits.open(path, memmap=False, lazy_load_hdus=False)
        for hdu in hdus:
            _ = hdu.data  # decompress while the file is open
        hdus.close()
        return hdus
