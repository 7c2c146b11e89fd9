"""The assembler names what it stores from the assembled file's own header: the observation id's
controller letter is the header's, which the chunks' data id alone cannot say."""

from __future__ import annotations

import pytest

from functions.assembler.naming import assembled_object_name
from obsingest.dataid import DataId
from tests.fixtures.camera_files import ccd_file, identity_cards

pytestmark = pytest.mark.unit

#: since 2023-10-05 the CCS controller (C) shares the OCS's counter: its exposure ids carry no
#: offset, so the data id alone would say MC_O_...
SHARED = DataId("LSSTCam", 2023110700078, 1)
CAMERA = "raw/LSSTCam/20231107/MC_C_20231107_000078/MC_C_20231107_000078_R01_S01.fits"


def test_the_name_is_the_headers_with_its_controller() -> None:
    data = ccd_file(SHARED, **identity_cards(SHARED, "C"))
    assert assembled_object_name(SHARED, data, "raw/") == CAMERA
    assert SHARED.object_name() != CAMERA  # what a name from the data id would have been


def test_a_header_without_identity_or_of_another_ccd_gets_the_data_ids_name() -> None:
    """Stored all the same: the register function quarantines it with the reason."""
    other = DataId("LSSTCam", 2023110700078, 2)
    assert assembled_object_name(SHARED, ccd_file(other), "raw/") == SHARED.object_name()
    no_identity = ccd_file(SHARED, RAFTBAY=None)
    assert assembled_object_name(SHARED, no_identity, "raw/") == SHARED.object_name()
    assert assembled_object_name(SHARED, b"not FITS" * 400, "raw/") == SHARED.object_name()
