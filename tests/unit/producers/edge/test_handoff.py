"""The hand-off convention: names, completeness (rename / settle), never-completed files, and
the watcher plus start-up scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from producers.edge.handoff import Found, HandoffIntake, classify
from producers.edge.settings import EdgeSettings
from tests.fixtures.camera_files import ccd_file

pytestmark = pytest.mark.unit


def kind_of(path: Path) -> str | None:
    return classify(path)


def test_classify_by_suffix_any_name() -> None:
    assert classify(Path("/h/MC_O_20250415_000060_R01_S01.fits")) == "ccd"
    assert kind_of(Path("/h/LSSTCam_2026112200012_094.fits")) == "ccd"
    assert kind_of(Path("/h/image.fits")) == "ccd"  # any name: the header says which CCD
    assert kind_of(Path("/h/image.fits.fz")) == "ccd"
    assert kind_of(Path("/h/LSSTCam_2026112200012.manifest.json")) == "manifest"
    assert kind_of(Path("/h/MC_O_20250415_000060.manifest.json")) == "manifest"
    assert kind_of(Path("/h/.MC_O_20250415_000060_R01_S01.fits.x1y2.tmp")) == "incomplete"
    assert kind_of(Path("/h/MC_O_20250415_000060_R01_S01.fits.part")) == "incomplete"
    assert classify(Path("/h/MC_O_20250415_000060_R01_S01.json")) is None  # sidecar
    assert classify(Path("/h/notes.txt")) is None


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
    first, second = DataId("LSSTCam", 2026112200001, 0), DataId("LSSTCam", 2026112200002, 3)
    old = tmp_path / first.identity().file_name
    old.write_bytes(ccd_file(first))  # written while down
    (tmp_path / "quarantine").mkdir()
    (tmp_path / "quarantine" / "MC_O_20261122_000001_R01_S00.fits").write_bytes(b"skipped")
    stale = tmp_path / "MC_O_20261122_000001_R01_S02.fits.tmp"
    stale.write_bytes(b"never finished")
    os.utime(stale, (time.time() - 100, time.time() - 100))
    got = Collector()
    intake = HandoffIntake(tmp_path, got, settings=EdgeSettings(incomplete_timeout=50, rescan_interval=60))
    intake.start()
    try:
        assert [f.path for f in got.found] == [old]
        assert got.found[0].data_id == first and got.found[0].identity is not None
        sub = tmp_path / "20261122" / "MC_O_20261122_000002"
        sub.mkdir(parents=True)
        (sub / "ccd-3.json").write_text('{"FILTER": "r"}')
        tmp = sub / ".ccd-3.fits.abc.tmp"
        tmp.write_bytes(ccd_file(second))
        tmp.rename(sub / "ccd-3.fits")  # any name: the header says which CCD
        wait_for(lambda: len(got.found) >= 3)
        by_kind = {f.kind: f for f in got.found}
        assert by_kind["incomplete"].path == stale
        error = by_kind["incomplete"].error
        assert error is not None and error.reason == "never-completed"
        new = next(f for f in got.found if f.path.parent == sub)
        assert new.kind == "ccd" and new.data_id == second
        assert new.identity is not None
        assert new.identity.file_name == "MC_O_20261122_000002_R01_S10.fits"
        assert new.sidecar == sub / "ccd-3.json"
        time.sleep(0.3)
        assert len(got.found) == 3  # each file offered once
    finally:
        intake.stop()


def test_settle_mode_waits_for_a_quiet_file(tmp_path: Path) -> None:
    got = Collector()
    intake = HandoffIntake(
        tmp_path, got, settings=EdgeSettings(complete="settle", settle_seconds=0.5, rescan_interval=60)
    )
    intake.start()
    try:
        path = tmp_path / "MC_O_20261122_000001_R01_S01.fits"
        data = ccd_file(DataId("LSSTCam", 2026112200001, 1))
        with path.open("wb") as fh:
            for i in range(4):
                fh.write(data[i * len(data) // 4 : (i + 1) * len(data) // 4])
                fh.flush()
                time.sleep(0.2)
            assert got.found == []  # still growing
        wait_for(lambda: got.found, timeout=5)
        assert got.found[0].path == path and got.found[0].kind == "ccd"
    finally:
        intake.stop()


def test_a_refused_file_is_offered_again_by_the_next_scan(tmp_path: Path) -> None:
    (tmp_path / "a.fits").write_bytes(ccd_file(DataId("LSSTCam", 2026112200001, 0)))
    got = Collector(accept=False)
    intake = HandoffIntake(tmp_path, got, settings=EdgeSettings(rescan_interval=60))
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


def test_a_new_directory_is_walked_alone_and_taken_files_cost_one_stat(tmp_path: Path, monkeypatch) -> None:
    """A new exposure's directory is scanned by itself (not every exposure kept beside it), and
    a full rescan passes over files already taken by one stat each, offering none again."""
    old = tmp_path / "20261122" / "MC_O_20261122_000001"
    old.mkdir(parents=True)
    for det in range(3):
        data_id = DataId("LSSTCam", 2026112200001, det)
        (old / data_id.identity().file_name).write_bytes(ccd_file(data_id))
    got = Collector()
    intake = HandoffIntake(tmp_path, got, settings=EdgeSettings(rescan_interval=60))
    intake.scan()
    assert len(got.found) == 3
    considered: list[Path] = []
    consider = intake._consider

    def counting(path: Path, complete: bool) -> None:
        considered.append(path)
        consider(path, complete)

    monkeypatch.setattr(intake, "_consider", counting)
    intake.scan()  # the full safety-net rescan: nothing new, nothing offered again
    assert considered == [] and len(got.found) == 3
    new = tmp_path / "20261122" / "MC_O_20261122_000002"
    new.mkdir()
    data_id = DataId("LSSTCam", 2026112200002, 7)
    (new / data_id.identity().file_name).write_bytes(ccd_file(data_id))
    intake.scan(new)
    assert considered == [new / data_id.identity().file_name]
    assert got.found[-1].data_id == data_id and len(got.found) == 4
    intake.scan(tmp_path / "quarantine")  # the edge's own: never walked
    intake.scan(tmp_path / "gone")  # vanished meanwhile: the whole root instead, no problem
    assert len(got.found) == 4 and intake._problem is None


def test_the_watcher_asks_for_a_scan_of_the_new_directory(tmp_path: Path) -> None:
    class Event:
        is_directory = True
        event_type = "created"
        src_path = str(tmp_path / "d")

    class Moved(Event):
        event_type = "moved"
        dest_path = str(tmp_path / "e")

    intake = HandoffIntake(tmp_path, Collector())
    intake.dispatch(Event())
    intake.dispatch(Moved())
    assert intake._events.get_nowait() == ("rescan", str(tmp_path / "d"), "")
    assert intake._events.get_nowait() == ("rescan", str(tmp_path / "e"), "")


def test_the_watcher_is_asked_only_for_the_events_the_intake_takes(tmp_path: Path, monkeypatch) -> None:
    """Opens, read-only closes and directory changes never reach the intake (kernel-filtered);
    creation, writes, renames and deletions still do."""
    from producers.edge import handoff

    kinds: list[tuple[str, bool]] = []
    dispatch = handoff.HandoffIntake.dispatch

    def recording(self, event) -> None:  # type: ignore[no-untyped-def]
        kinds.append((event.event_type, event.is_directory))
        dispatch(self, event)

    monkeypatch.setattr(handoff.HandoffIntake, "dispatch", recording)
    kept = tmp_path / "kept.txt"
    kept.write_bytes(b"x")
    got = Collector()
    intake = HandoffIntake(tmp_path, got, settings=EdgeSettings(rescan_interval=60))
    intake.start()
    try:
        kept.read_bytes()  # an open and a read-only close: nothing the intake takes
        data_id = DataId("LSSTCam", 2026112200003, 5)
        (tmp_path / "sub").mkdir()
        tmp = tmp_path / "x.fits.tmp"
        tmp.write_bytes(ccd_file(data_id))
        tmp.rename(tmp.with_name(data_id.identity().file_name))
        wait_for(lambda: got.found)
        kept.unlink()
        wait_for(lambda: ("deleted", False) in kinds)
    finally:
        intake.stop()
    assert got.found[0].data_id == data_id
    assert {"opened", "closed_no_write"}.isdisjoint(k for k, _ in kinds)
    assert ("modified", True) not in kinds
    assert {("created", True), ("created", False), ("closed", False), ("moved", False)} <= set(kinds)


def test_a_burst_of_events_ticks_as_often_as_idle_not_per_event(tmp_path: Path, monkeypatch) -> None:
    """``tick`` stats every file being written or settling: a burst of events runs it every
    TICK_SECONDS, as an idle intake does, not after each event."""
    from producers.edge.handoff import TICK_SECONDS

    intake = HandoffIntake(tmp_path, Collector(), settings=EdgeSettings(rescan_interval=60))
    ticks: list[float] = []
    tick = intake.tick

    def counted() -> None:
        ticks.append(time.monotonic())
        tick()

    monkeypatch.setattr(intake, "tick", counted)
    for i in range(3000):
        intake._events.put(("modified", str(tmp_path / f"n{i}.txt"), ""))
    began = time.monotonic()
    intake.start()
    try:
        wait_for(lambda: intake._events.empty())
        drained = time.monotonic() - began
        time.sleep(3 * TICK_SECONDS)
    finally:
        intake.stop()
    assert len([t for t in ticks if t - began <= drained]) <= drained / TICK_SECONDS + 2
    assert [t for t in ticks if t - began > drained]  # and still ticks when idle


def test_rename_mode_asks_for_no_write_events_and_follows_a_slow_temp_file(tmp_path: Path) -> None:
    """A temp file written for longer than ``incomplete_timeout``, each write within it, is
    followed by its mtime (no modify events in rename mode) and is never reported as never
    completed; once renamed it is offered, once."""
    from watchdog.events import FileModifiedEvent

    from producers.edge.handoff import _watched

    assert FileModifiedEvent not in _watched("rename")
    assert FileModifiedEvent in _watched("settle")
    got = Collector()
    intake = HandoffIntake(tmp_path, got, settings=EdgeSettings(incomplete_timeout=0.6, rescan_interval=60))
    intake.start()
    try:
        data = ccd_file(DataId("LSSTCam", 2026112200001, 1))
        tmp = tmp_path / ".MC_O_20261122_000001_R01_S01.fits.x.tmp"
        with tmp.open("wb") as fh:
            for i in range(5):
                fh.write(data[i * len(data) // 5 : (i + 1) * len(data) // 5])
                fh.flush()
                time.sleep(0.3)
        assert got.found == []  # 1.5 s of writes, none 0.6 s after the one before
        tmp.rename(tmp_path / "MC_O_20261122_000001_R01_S01.fits")
        wait_for(lambda: got.found, timeout=5)
        time.sleep(0.3)
        assert [(f.kind, f.path.name) for f in got.found] == [("ccd", "MC_O_20261122_000001_R01_S01.fits")]
    finally:
        intake.stop()


def test_a_full_scan_forgets_taken_files_that_are_no_longer_there(tmp_path: Path) -> None:
    """The intake remembers what it took (and, after a restart, what the journal finished) so as
    not to offer it again; a night moved out with its directory, or files gone before the
    restart, must not stay remembered for weeks."""
    root, night = tmp_path / "handoff", tmp_path / "handoff" / "20250415"
    night.mkdir(parents=True)
    for i in range(300):
        (night / f"MC_O_20250415_{i:06d}.manifest.json").write_text("{}")
    known = {f"/gone/MC_O_20250301_{i:06d}_R22_S11.fits": (1.0, 10) for i in range(300)}
    intake = HandoffIntake(root, lambda _found: True, settings=EdgeSettings(rescan_interval=60), known=known)
    intake.scan()
    assert len(intake._taken) == 300  # this night's files; the journal's gone ones forgotten
    (night / "MC_O_20250415_000000.manifest.json").rename(tmp_path / "kept.json")
    intake.scan()
    assert len(intake._taken) == 299
    night.rename(tmp_path / "archive")  # watchdog reports the directory, not its files
    intake.scan()
    assert intake._taken == {}


def test_a_watcher_that_died_is_replaced_or_reported(tmp_path: Path, monkeypatch) -> None:
    """An inotify error ends watchdog's thread silently: new CCDs would wait for the 30 s rescan
    (six budgets) while /health said ready. A new watcher is started; one that cannot start is a
    problem until one can."""
    found: list[Found] = []
    problems: list[str | None] = []

    def take(f: Found) -> bool:
        found.append(f)
        return True

    intake = HandoffIntake(tmp_path, take, problems.append, settings=EdgeSettings(rescan_interval=30))
    intake.start()
    watch = intake._watch

    def broken() -> None:
        raise OSError(28, "inotify watch limit reached")

    try:
        monkeypatch.setattr(intake, "_watch", broken)
        for emitter in list(intake._observer.emitters):
            emitter.stop()
            emitter.join(timeout=5)
        wait_for(lambda: problems and problems[-1] and "source-unwatched" in problems[-1])
        monkeypatch.setattr(intake, "_watch", watch)
        wait_for(lambda: problems[-1] is None, timeout=15)  # a new watcher, 5 s later
        data_id = DataId("LSSTCam", 2026112200002, 3)
        (tmp_path / ".x.tmp").write_bytes(ccd_file(data_id))
        (tmp_path / ".x.tmp").rename(tmp_path / data_id.identity().file_name)
        wait_for(lambda: len(found) == 1, timeout=5)  # by the new watcher, not the 30 s rescan
    finally:
        intake.stop()
