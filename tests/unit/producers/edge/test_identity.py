"""Which CCD a hand-off file is: from its header (and sidecar), under any name; a name that claims
a CCD must claim the header's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, HeaderMismatch, NoIdentity
from producers.compress import compress_fits
from producers.edge.handoff import Found, identify
from producers.edge.identity import handoff_identity, name_of_file
from tests.fixtures.camera_files import (
    camera_file_name,
    ccd_file,
    expected_observation_info,
    fits_from_cards,
    identity_cards,
    real_headers,
)

pytestmark = pytest.mark.unit

DID = DataId("LSSTCam", 2025041500060, 1)


@pytest.mark.parametrize(("fixture", "cards"), real_headers())
def test_every_real_header_under_its_camera_name(tmp_path: Path, fixture, cards) -> None:
    want = expected_observation_info()[fixture]
    path = tmp_path / camera_file_name(want)
    path.write_bytes(fits_from_cards(cards))
    identity = handoff_identity(path)
    assert identity.data_id == DataId(want["instrument"], want["exposure_id"], want["detector_num"])
    assert identity.obs_id == want["observation_id"] and identity.group == want["exposure_group"]
    assert identity.file_name == path.name


def test_any_name_is_taken_and_the_earlier_names_still_are(tmp_path: Path) -> None:
    for name in ("ccd.fits", "LSSTCam_2025041500060_001.fits", DID.identity().file_name):
        path = tmp_path / name
        path.write_bytes(ccd_file(DID))
        assert handoff_identity(path).data_id == DID


def test_a_name_claiming_another_ccd_is_a_header_mismatch_with_both(tmp_path: Path) -> None:
    for name, says in (
        ("MC_O_20250415_000061_R01_S01.fits", "LSSTCam/2025041500061/001 (MC_O_20250415_000061)"),
        ("MC_C_20250415_000060_R01_S01.fits", "LSSTCam/2025041500060/001 (MC_C_20250415_000060)"),
        ("LSSTCam_2025041500060_002.fits", "LSSTCam/2025041500060/002"),
    ):
        path = tmp_path / name
        path.write_bytes(ccd_file(DID))
        with pytest.raises(HeaderMismatch, match="the header says LSSTCam/2025041500060/001") as e:
            handoff_identity(path)
        assert f"file name says {says}" in str(e.value)


def test_a_header_without_identity_names_the_card(tmp_path: Path) -> None:
    path = tmp_path / "flat.fits"
    path.write_bytes(ccd_file(DID, RAFTBAY=None))
    with pytest.raises(NoIdentity, match="no RAFTBAY card") as info:
        handoff_identity(path)
    assert str(path) in str(info.value) and info.value.reason == "no-identity"
    found = identify(Found("ccd", path))
    assert found is not None and found.kind == "bad" and found.error is not None
    assert found.error.reason == "no-identity"


def test_not_fits_is_corrupt_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "MC_O_20250415_000060_R01_S01.fits"
    path.write_bytes(b"not FITS at all\n" * 300)
    with pytest.raises(CorruptFile, match=f"{path}: not a FITS file"):
        handoff_identity(path)
    assert identify(Found("ccd", tmp_path / "gone.fits")) is None  # vanished: nothing to do


def test_a_sidecar_may_give_the_identity_but_not_change_it(tmp_path: Path) -> None:
    path = tmp_path / "bare.fits"
    path.write_bytes(fits_from_cards({"FILTER": "r_57"}))
    assert handoff_identity(path, identity_cards(DID)).data_id == DID
    path.write_bytes(ccd_file(DID))
    assert handoff_identity(path, {"CCDSLOT": "S01", "FILTER": "g"}).data_id == DID  # agrees
    with pytest.raises(HeaderMismatch, match="sidecar says LSSTCam/2025041500060/000"):
        handoff_identity(path, {"CCDSLOT": "S00"})


def test_a_precompressed_file_must_say_itself_who_it_is(tmp_path: Path) -> None:
    path = tmp_path / "bare.fits.fz"
    path.write_bytes(compress_fits(fits_from_cards({"FILTER": "r_57"}), threads=1))
    with pytest.raises(NoIdentity):  # its sidecar is not merged into what is sent
        handoff_identity(path, identity_cards(DID))
    path.write_bytes(compress_fits(ccd_file(DID), threads=1))
    assert handoff_identity(path).data_id == DID
    with pytest.raises(HeaderMismatch, match="sidecar says LSSTCam/2025041500060/000"):
        handoff_identity(path, {"CCDSLOT": "S00"})


def test_what_names_claim() -> None:
    assert name_of_file("MC_O_20250415_000060_R01_S01.fits") == (DID, "MC_O_20250415_000060")
    assert name_of_file("AT_O_20240624_000106_R00_S00.fits.fz") == (
        DataId("LATISS", 2024062400106, 0),
        "AT_O_20240624_000106",
    )
    assert name_of_file("LSSTCam_2025041500060_001.fits") == (DID, None)
    assert name_of_file("ZZ_O_20250415_000060_R01_S01.fits") is None  # no camera of ours
    assert name_of_file("raw-ccd.fits") is None


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        ({"DATE-END": "2023-11-08T03:00:37.500", "TIMESYS": "TAI"}, "2023-11-08T03:00:00.500"),
        ({"DATE-END": "2023-11-08T03:00:37.500"}, "2023-11-08T03:00:37.500"),  # no TIMESYS: UTC
        ({"DATE-END": "not a time", "TIMESYS": "TAI"}, None),  # the manifest says it then
        ({"DATE-END": "2023-11-08T03:00:37.5", "TIMESYS": "GPS"}, None),  # a scale we do not read
        ({"TIMESYS": "TAI"}, None),
    ],
)
def test_the_readout_end_is_date_end_as_a_utc_instant(cards: dict[str, str], expected: str | None) -> None:
    from producers.edge.identity import readout_end

    assert readout_end(cards.get) == (None if expected is None else datetime_utc(expected))


@pytest.mark.parametrize("timesys", ["TAI", "UTC", None, " tai "])
def test_the_readout_end_from_the_leap_second_table_is_astropys_instant(timesys) -> None:
    """The camera's TAI (and UTC) DATE-END is converted by the leap-second table, not astropy:
    the same instant to the microsecond, over 1972-2027 and around leap seconds."""
    import random
    from datetime import datetime, timedelta

    from obsingest.timescales import header_instant
    from producers.edge.identity import readout_end

    rng = random.Random(19)
    values = ["2016-12-31T23:59:59.500", "2017-01-01T00:00:37.000", "1999-01-01T00:00:31.500"]
    values += [
        (datetime(1972, 1, 2) + timedelta(seconds=rng.uniform(0, 55 * 365 * 86400))).isoformat(
            timespec="milliseconds"
        )
        for _ in range(300)
    ]
    values += ["1998-12-31T23:59:60.500", "1999-01-01T00:00:30.999", "1999-01-01T00:00:32.000"]
    for value in values:
        cards = {"DATE-END": value, "TIMESYS": timesys}
        try:
            expected = header_instant(value, timesys).timestamp()
        except ValueError:  # inside a leap second (TAI 1999-01-01T00:00:31.5): no UTC datetime
            assert readout_end(cards.get) is None, value
            continue
        assert readout_end(cards.get) == pytest.approx(expected, abs=1e-6), value


def test_identify_carries_the_date_end_of_the_sidecar_over_the_files(tmp_path: Path) -> None:
    did = DataId("LSSTCam", 2023110700078, 1)
    path = tmp_path / "x.fits"
    extra: dict[str, Any] = {"DATE-END": "2023-11-08T03:00:37.000"}
    path.write_bytes(ccd_file(did, TIMESYS="TAI", **extra))
    (tmp_path / "x.json").write_text('{"DATE-END": "2023-11-08T03:00:38.000"}')
    found = identify(Found("ccd", path, mtime=1.0))
    assert found is not None and found.kind == "ccd"
    assert found.readout == datetime_utc("2023-11-08T03:00:01")


def datetime_utc(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text + "+00:00").timestamp()
