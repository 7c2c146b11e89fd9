"""The edge service takes hand-off files under any name, by their header's identity, and stores
each as the camera's file name in Rubin's layout; a file whose header says no CCD is quarantined
with the card (its sidecar with it); a caller's data id must be the header's."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from obsingest.dataid import DataId
from obsingest.store.local import LocalDirStore
from producers.edge import CcdFile, EdgeService, EdgeSettings
from tests.fixtures.camera_files import ccd_file, identity_cards

pytestmark = pytest.mark.unit

DID = DataId("LSSTCam", 2023110700078, 1)  # the CCS controller, sharing the OCS's counter


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeService]:
    root = tmp_path_factory.mktemp("edge")
    settings = EdgeSettings(
        destination=f"file://{root / 'store'}",
        spool=root / "spool",
        handoff=root / "handoff",
        workers=1,
        health_port=-1,
        min_free_bytes=0,
        rescan_interval=0.5,
    )
    service = EdgeService(settings, log_level="WARNING").start()
    yield service
    service.stop()


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def hand_over(edge: EdgeService, name: str, data: bytes) -> Path:
    assert edge.handoff is not None
    path = edge.handoff / "20231107" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{name}.part")
    tmp.write_bytes(data)
    tmp.rename(path)
    return path


def test_any_name_is_stored_as_the_camera_names_it(edge: EdgeService) -> None:
    hand_over(edge, "ccd 1 of the night.fits", ccd_file(DID, **identity_cards(DID, "C")))
    assert edge.journal is not None
    wait_for(lambda: (e := edge.journal.get(DID.key)) is not None and e.state == "acked")
    entry = edge.journal.get(DID.key)
    assert entry.object == ("raw/LSSTCam/20231107/MC_C_20231107_000078/MC_C_20231107_000078_R01_S01.fits")
    store = LocalDirStore(edge.settings.destination[len("file://") :])
    assert store.read(entry.object)[:9] == b"SIMPLE  ="


def test_a_file_without_identity_is_quarantined_with_the_card(edge: EdgeService) -> None:
    assert edge.handoff is not None
    (edge.handoff / "20231107").mkdir(parents=True, exist_ok=True)
    (edge.handoff / "20231107" / "flat.json").write_text('{"FILTER": "r"}')
    hand_over(edge, "flat.fits", ccd_file(DID, RAFTBAY=None))
    moved = edge.handoff / "quarantine" / "20231107"
    wait_for(lambda: (moved / "flat.fits.reason.json").exists())
    note = json.loads((moved / "flat.fits.reason.json").read_text())
    assert note["reason"] == "no-identity" and "no RAFTBAY card" in note["error"]
    wait_for(lambda: (moved / "flat.json").exists())  # its sidecar goes with it
    assert edge.counts()["quarantined"].get("no-identity") == 1


def test_a_callers_data_id_must_be_the_headers(edge: EdgeService, tmp_path: Path) -> None:
    path = tmp_path / "x.fits"
    path.write_bytes(ccd_file(DataId("LSSTCam", 2023110700079, 1)))
    outcome = edge.submit(CcdFile(str(path), "LSSTCam", 2023110700079, 2)).result(timeout=60)
    assert outcome.state == "quarantined" and outcome.reason == "header-mismatch"
    assert "its header says LSSTCam/2023110700079/001" in outcome.error


def test_a_caller_may_let_the_header_say_which_ccd(edge: EdgeService, tmp_path: Path) -> None:
    did = DataId("LSSTCam", 2023110700080, 5)
    path = tmp_path / "MC_O_20231107_000080_R01_S12.fits"
    path.write_bytes(ccd_file(did))
    ccd = CcdFile.from_header(path)
    assert ccd.data_id == did
    outcome = edge.submit(ccd).result(timeout=60)
    assert outcome.ok and outcome.object_name.endswith("/MC_O_20231107_000080_R01_S12.fits")


def acked(edge: EdgeService, key: str) -> bool:
    assert edge.journal is not None
    entry = edge.journal.get(key)
    return entry is not None and entry.state == "acked"


def test_the_readout_time_is_the_headers_date_end_in_utc(edge: EdgeService) -> None:
    """DATE-END (TAI, 37 s ahead of UTC) is the CCD's end of readout: its budget starts there,
    not at the manifest's obs_start + exposure_time (~1 s earlier) nor at the file's mtime."""
    did = DataId("LSSTCam", 2023110700081, 3)
    path = hand_over(
        edge,
        "with-date-end.fits",
        ccd_file(
            did,
            **identity_cards(did, "O"),
            TIMESYS="TAI",
            **cast(dict[str, Any], {"DATE-END": "2023-11-08T03:00:37.500"}),
        ),
    )
    wait_for(lambda: acked(edge, did.key))
    assert edge.journal is not None
    entry = edge.journal.get(did.key)
    assert entry.readout == datetime(2023, 11, 8, 3, 0, 0, 500000, UTC).timestamp()
    assert entry.readout != path.stat().st_mtime


def test_without_date_end_the_readout_time_is_the_files_mtime(edge: EdgeService) -> None:
    did = DataId("LSSTCam", 2023110700082, 3)
    path = hand_over(edge, "without-date-end.fits", ccd_file(did, **identity_cards(did, "O")))
    wait_for(lambda: acked(edge, did.key))
    assert edge.journal is not None
    assert edge.journal.get(did.key).readout == path.stat().st_mtime


def test_a_second_file_with_other_bytes_for_a_sent_ccd_is_a_quarantined_conflict(edge: EdgeService) -> None:
    did = DataId("LSSTCam", 2023110700083, 4)
    first = hand_over(edge, "first.fits", ccd_file(did))
    wait_for(lambda: acked(edge, did.key))
    assert edge.journal is not None
    object_name = edge.journal.get(did.key).object
    second = hand_over(edge, "second.fits", ccd_file(did, pixels=bytes(1024)))
    moved = edge.handoff / "quarantine" / "20231107"
    wait_for(lambda: (moved / "second.fits.reason.json").exists())
    note = json.loads((moved / "second.fits.reason.json").read_text())
    assert note["reason"] == "checksum-conflict"
    assert str(first) in note["error"] and str(second) in note["error"]
    assert note["error"].count("crc32c:") == 2  # both files' checksums
    assert not second.exists() and first.exists()
    entry = edge.journal.get(did.key)  # the first stays what was sent
    assert (entry.source, entry.state, entry.object) == (str(first), "acked", object_name)


def test_a_second_copy_of_the_same_bytes_is_a_duplicate_not_a_conflict(edge: EdgeService) -> None:
    did = DataId("LSSTCam", 2023110700084, 4)
    hand_over(edge, "original.fits", ccd_file(did))
    wait_for(lambda: acked(edge, did.key))
    duplicates = edge.counts()["duplicates"]
    copy = hand_over(edge, "copy.fits", ccd_file(did))
    wait_for(lambda: edge.counts()["duplicates"] == duplicates + 1)
    assert copy.exists()  # on_ack keep: left where it is, as the first one
    assert not (edge.handoff / "quarantine" / "20231107" / "copy.fits").exists()
