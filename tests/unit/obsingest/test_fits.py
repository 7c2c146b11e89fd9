import io

import numpy as np
import pytest
from astropy.io import fits

from obsingest.errors import CorruptFile
from obsingest.fits import parse_fits

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
    hdus = parse_fits(_fits())
    assert len(hdus) == 2
    primary = hdus[0]
    assert primary.str_value("INSTRUME") == "LSSTCam"
    assert primary.int_value("EXPID") == 2026112200001
    assert primary.str_value("DATE-OBS") == "2026-11-22T03:04:05.000"
    assert hdus[1].str_value("ZCMPTYPE") == "RICE_1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[: len(d) - 10], "truncated"),
        (lambda d: d[:2000], "not a whole number"),
        (lambda d: d[:2880] + b"X" * 2880, "does not start with XTENSION"),
        (lambda d: b"GARBAGE" + d, "not a FITS file"),
        (lambda d: d + b"trailing junk" + bytes(2867), "does not start with XTENSION"),
        (
            lambda d: d.replace(b"BITPIX  =                    8", b"BITPIX  =                    7"),
            "invalid BITPIX",
        ),
    ],
)
def test_corrupt_files_are_refused_with_the_reason(mutate, message):
    with pytest.raises(CorruptFile, match=message):
        parse_fits(mutate(_fits()))
