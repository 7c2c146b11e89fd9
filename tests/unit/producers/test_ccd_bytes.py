"""What a sender checks and names: whole FITS, an identity in the header, the data id it was
given, and the camera's file name in Rubin's layout with the header's controller letter."""

from __future__ import annotations

import pytest

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, HeaderMismatch, NoIdentity
from producers.ccd_bytes import check_ccd_bytes
from tests.fixtures.camera_files import ccd_file, identity_cards

pytestmark = pytest.mark.unit

DID = DataId("LSSTCam", 2023110700078, 1)


def test_the_identity_is_the_headers() -> None:
    identity = check_ccd_bytes(DID, ccd_file(DID, **identity_cards(DID, "C")))
    assert identity.obs_id == "MC_C_20231107_000078"
    assert identity.object_name("raw/") == (
        "raw/LSSTCam/20231107/MC_C_20231107_000078/MC_C_20231107_000078_R01_S01.fits"
    )


def test_refused_no_identity_another_ccd_and_broken_bytes() -> None:
    with pytest.raises(NoIdentity, match="not sent: header has no CCDSLOT card"):
        check_ccd_bytes(DID, ccd_file(DID, CCDSLOT=None))
    with pytest.raises(HeaderMismatch, match="its header says LSSTCam/2023110700078/002"):
        check_ccd_bytes(DID, ccd_file(DataId("LSSTCam", 2023110700078, 2)))
    with pytest.raises(CorruptFile, match="CCD LSSTCam/2023110700078/001: not sent"):
        check_ccd_bytes(DID, ccd_file(DID)[:-100])
