import io

import numpy as np
import pytest
from astropy.io import fits

from obsingest.errors import CorruptFile
from obsingest.fitsinfo import inspect

pytestmark = pytest.mark.unit


def _fits() -> bytes:
    primary = fits.PrimaryHDU()
    primary.header["INSTRUME"] = "LSSTCam"
    primary.header["EXPID"] = 2026112200001
    primary.header["DATE-OBS"] = "2026-11-22T03:04:05.000"
    hdul = fits.HDUList([primary, fits.CompImageHDU(np.arange(2048, dtype="i4").reshape(64, 32))])
    buf = io.BytesIO()
    hdul.writeto(buf)
    return buf.getvalue()


def test_reads_structure_and_primary_header():
    info = inspect(_fits())
    assert len(info.hdus) == 2
    assert info.primary["INSTRUME"] == "LSSTCam"
    assert info.primary["EXPID"] == 2026112200001
    assert info.primary["DATE-OBS"] == "2026-11-22T03:04:05.000"
    assert info.is_tile_compressed


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[: len(d) - 10], "truncated"),
        (lambda d: d[:2000], "truncated inside a header"),
        (lambda d: b"GARBAGE" + d, "not a FITS file"),
        (lambda d: d + b"trailing junk" + bytes(2867), "garbage after HDU"),
        (
            lambda d: d.replace(
                b"BITPIX  =                    8", b"BITPIX  =                    7"
            ),
            "invalid BITPIX",
        ),
    ],
)
def test_corrupt_files_are_refused_with_the_reason(mutate, message):
    with pytest.raises(CorruptFile, match=message) as info:
        inspect(mutate(_fits()), "object 'x.fits.fz'")
    assert "x.fits.fz" in str(info.value)
