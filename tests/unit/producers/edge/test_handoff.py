"""The hand-off convention: names, completeness (rename / settle), never-completed files, and
the watcher plus start-up scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from producers.edge.handoff import Found, HandoffIntake, classify

pytestmark = pytest.mark.unit


def test_classify_by_name() -> None:
    kind, data_id, error = classify(Path("/h/LSSTCam_2026112200012_094.fits"))
    assert (kind, data_id, error) == ("ccd", DataId("LSSTCam", 2026112200012, 94), None)
    assert classify(Path("/h/LSSTCam_2026112200012.manifest.json"))[0] == "manifest"
    assert classify(Path("/h/.LSSTCam_2026112200012_094.fits.x1y2.tmp"))[0] == "incomplete"
    assert classify(Path("/h/LSSTCam_2026112200012_094.fits.part"))[0] == "incomplete"
    assert classify(Path("/h/LSSTCam_2026112200012_094.json")) is None  # sidecar
    assert classify(Path("/h/notes.txt")) is None
    kind, _, error = classify(Path("/h/image.fits"))
    assert kind == "bad" and error is not None and error.reason == "bad-file-name"
    kind, _, error = classify(Path("/h/LSSTCam_2026112200012_999.fits"))
    assert kind == "bad" and "detector 999" in str(error)


class Collector:
    def __init__(self, accept: bool = True) -> None:
        self.found: list[Found] = []
        self.accept = accept

    def __call__(self, found: Found) -> bool:
        self.found.append(found)
        return self.accept


def wait_for(pred, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_startup_scan_watcher_rename_and_never_completed(tmp_path: Path) -> None:
    (tmp_path / "LSSTCam_2026112200001_000.fits").write_bytes(b"old")  # written while down
    (tmp_path / "quarantine").mkdir()
    (tmp_path / "quarantine" / "LSSTCam_2026112200001_009.fits").write_bytes(b"skipped")
    stale = tmp_path / "LSSTCam_2026112200001_005.fits.tmp"
    stale.write_bytes(b"never finished")
    os.utime(stale, (time.time() - 100, time.time() - 100))
    got = Collector()
    intake = HandoffIntake(tmp_path, got, incomplete_timeout=50, rescan_interval=60)
    intake.start()
    try:
        assert [f.path.name for f in got.found] == ["LSSTCam_2026112200001_000.fits"]
        sub = tmp_path / "20261122" / "2026112200002"
        sub.mkdir(parents=True)
        (sub / "LSSTCam_2026112200002_003.json").write_text('{"FILTER": "r"}')
        tmp = sub / ".LSSTCam_2026112200002_003.fits.abc.tmp"
        tmp.write_bytes(b"x" * 100)
        tmp.rename(sub / "LSSTCam_2026112200002_003.fits")
        wait_for(lambda: len(got.found) >= 3)
        by_kind = {f.kind: f for f in got.found}
        assert by_kind["incomplete"].path == stale
        assert by_kind["incomplete"].error.reason == "never-completed"
        new = next(f for f in got.found if f.path.parent == sub)
        assert new.data_id == DataId("LSSTCam", 2026112200002, 3)
        assert new.sidecar == sub / "LSSTCam_2026112200002_003.json"
        time.sleep(0.3)
        assert len(got.found) == 3  # each file offered once
    finally:
        intake.stop()


def test_settle_mode_waits_for_a_quiet_file(tmp_path: Path) -> None:
    got = Collector()
    intake = HandoffIntake(tmp_path, got, mode="settle", settle=0.5, rescan_interval=60)
    intake.start()
    try:
        path = tmp_path / "LSSTCam_2026112200001_001.fits"
        with path.open("wb") as fh:
            for _ in range(4):
                fh.write(b"x" * 10)
                fh.flush()
                time.sleep(0.2)
            assert got.found == []  # still growing
        wait_for(lambda: got.found, timeout=5)
        assert got.found[0].path == path
    finally:
        intake.stop()


def test_a_refused_file_is_offered_again_by_the_next_scan(tmp_path: Path) -> None:
    (tmp_path / "LSSTCam_2026112200001_000.fits").write_bytes(b"x")
    got = Collector(accept=False)
    intake = HandoffIntake(tmp_path, got, rescan_interval=60)
    intake.scan()
    intake.scan()
    assert len(got.found) == 2
    got.accept = True
    intake.scan()
    intake.scan()
    assert len(got.found) == 3


def test_an_unreadable_directory_is_a_problem_until_it_reads(tmp_path: Path) -> None:
    problems: list[str | None] = []
    root = tmp_path / "gone"
    intake = HandoffIntake(root, Collector(), problems.append)
    intake.scan()
    assert problems and problems[-1] is not None and "source-unreadable" in problems[-1]
    root.mkdir()
    intake.scan()
    assert problems[-1] is None
