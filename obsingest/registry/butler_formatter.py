"""A Butler formatter for raws where the science pipelines' one is not installed.

A datastore record names the formatter that reads its file, and ``Butler.ingest`` imports it.
Production raws name obs_lsst's (``lsst.obs.lsst.rawFormatter.LsstCamRawFormatter``, which
assembles an ``lsst.afw.image.Exposure``), but ``lsst.obs.*`` is not on PyPI. This one lets a
repository without the science pipelines (the tests', a quick-look one) ingest and read the same
files: ``butler.get`` returns the tiled-Rice-compressed FITS as an ``astropy.io.fits.HDUList``
(pixels decompressed by astropy), with a storage class whose python type is that
(``obsingest.registry.butler.RAW_FITS_STORAGE_CLASS``). See docs/butler.md for which one a
repository gets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from lsst.daf.butler import FormatterV2


class RawFitsFormatter(FormatterV2):
    """Reads a (compressed) raw FITS file into an in-memory ``astropy.io.fits.HDUList``."""

    default_extension: ClassVar[str] = ".fits.fz"
    supported_extensions: ClassVar[frozenset[str]] = frozenset({".fits", ".fits.fz", ".fz"})
    can_read_from_local_file: ClassVar[bool] = True

    def read_from_local_file(
        self, path: str, component: str | None = None, expected_size: int = -1
    ) -> Any:
        from astropy.io import fits

        hdus = fits.open(path, memmap=False, lazy_load_hdus=False)
        for hdu in hdus:
            _ = hdu.data  # decompress while the file is open
        hdus.close()
        return hdus
