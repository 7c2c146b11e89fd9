"""A restarted edge works in proportion to what is unfinished: hand-off files whose CCD the
journal holds as acknowledged (same path, mtime and size) are not offered, journalled or read
again; one whose CCD was not acknowledged before the stop is resent."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.errors import PermanentError
from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge import EdgeService, EdgeSettings
from producers.edge.ccd import spool_path
from producers.edge.handoff import Found
from producers.edge.journal import Entry, Journal

pytestmark = pytest.mark.unit

EXPOSURE = 2026112200021


def wait_for(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def edge_settings(tmp_path: Path, handoff: Path) -> EdgeSettings:
    return EdgeSettings(
        destination=f"file://{tmp_path / 'store'}",
        spool=tmp_path / "spool",
        handoff=handoff,
        workers=1,
        health_port=-1,
        min_free_bytes=0,
    )


def spy_on_offers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the hand-off files the intake offers the service, in order."""
    offered: list[str] = []
    on_found = EdgeService._on_found

    def spy(self: EdgeService, found: Found) -> bool:
        offered.append(found.path.name)
        return on_found(self, found)

    monkeypatch.setattr(EdgeService, "_on_found", spy)
    return offered


def test_a_restart_skips_acknowledged_files_and_resends_the_unacknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handoff = tmp_path / "handoff"
    handoff.mkdir()
    for detector in range(3):
        spec = CcdSpec("LSSTCam", EXPOSURE, detector, 20261122, datetime.now(UTC), 15.0, "r", "small")
        write_raw_ccd(spec, handoff / f"LSSTCam_{EXPOSURE}_{detector:03d}.fits")
    settings = edge_settings(tmp_path, handoff)
    offered = spy_on_offers(monkeypatch)
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: edge.journal.counts()["acked"] == 3)
    finally:
        edge.stop()
    assert sorted(offered) == [f"LSSTCam_{EXPOSURE}_{d:03d}.fits" for d in range(3)]
    # a crash came between detector 2's send and its ack
    journal = Journal(settings.spool)
    unacked = f"LSSTCam/{EXPOSURE}/002"
    assert journal.get(unacked) is not None
    journal.mark(unacked, "sent", acked_at=None)
    assert len(journal.handed_off()) == 2
    journal.close()
    offered.clear()
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: edge.journal.counts()["acked"] == 3)
        stats = edge.counts()
        entry = edge.journal.get(unacked)
    finally:
        edge.stop()
    assert offered == [f"LSSTCam_{EXPOSURE}_002.fits"]  # the acknowledged two: not offered
    assert stats["resumed"] == 1 and stats["accepted"] == 0
    assert entry is not None and entry.state == "acked" and entry.status == "exists"


def test_a_restart_finishes_moving_a_quarantined_file_a_crash_left_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quarantine is journalled before the file moves aside: a SIGKILL in between left it in
    the hand-off directory, skipped as finished by every later run (chaos edge-sigkill)."""
    handoff = tmp_path / "handoff"
    handoff.mkdir()
    spec = CcdSpec("LSSTCam", EXPOSURE, 7, 20261122, datetime.now(UTC), 15.0, "r", "small")
    bad = handoff / f"LSSTCam_{EXPOSURE}_007.fits"
    write_raw_ccd(spec, bad)
    with bad.open("r+b") as fh:  # truncated: a corrupt file, quarantined with its reason
        fh.truncate(bad.stat().st_size // 2)
    settings = edge_settings(tmp_path, handoff)
    aside = handoff / "quarantine" / bad.name
    note = aside.with_name(aside.name + ".reason.json")
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: edge.journal.counts()["quarantined"] == 1 and note.exists())
    finally:
        edge.stop()
    # the crash: journalled as quarantined, the file not yet moved (os.replace keeps mtime, size)
    note.unlink()
    aside.replace(bad)
    offered = spy_on_offers(monkeypatch)
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: aside.exists() and note.exists(), timeout=30)
        counts = edge.journal.counts()
    finally:
        edge.stop()
    assert not bad.exists() and offered == []
    assert '"reason": "corrupt-file"' in note.read_text()
    assert counts["quarantined"] == 1  # the same entry, not a second quarantine

    # a new file later written under that name is the intake's to judge, not moved unread
    write_raw_ccd(spec, bad)
    aside.unlink()
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: offered == [bad.name], timeout=30)
    finally:
        edge.stop()
    assert bad.exists() and not aside.exists()


def test_a_restart_releases_an_acknowledged_file_a_crash_kept_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_ack=delete: the acknowledgement is journalled before the file is deleted, so a SIGKILL
    in between left it in the hand-off directory; the next run offers it again and deletes it,
    neither journalling nor sending it a second time."""
    handoff = tmp_path / "handoff"
    handoff.mkdir()
    spec = CcdSpec("LSSTCam", EXPOSURE, 4, 20261122, datetime.now(UTC), 15.0, "r", "small")
    raw = handoff / f"LSSTCam_{EXPOSURE}_004.fits"
    write_raw_ccd(spec, raw)
    content, mtime = raw.read_bytes(), raw.stat().st_mtime
    settings = edge_settings(tmp_path, handoff).model_copy(update={"on_ack": "delete"})
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: edge.journal.counts()["acked"] == 1 and not raw.exists())
    finally:
        edge.stop()
    stored = sorted(p.name for p in (tmp_path / "store").rglob("*") if p.is_file())
    # the crash: journalled as acknowledged, the file not yet deleted
    raw.write_bytes(content)
    os.utime(raw, (mtime, mtime))
    offered = spy_on_offers(monkeypatch)
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: not raw.exists(), timeout=30)
        counts, stats = edge.journal.counts(), edge.counts()
    finally:
        edge.stop()
    assert offered == [raw.name]
    assert counts["acked"] == 1 and stats["accepted"] == 0 and stats["resumed"] == 0
    assert sorted(p.name for p in (tmp_path / "store").rglob("*") if p.is_file()) == stored


def test_a_conflicting_file_stays_for_a_person_through_a_restart(tmp_path: Path) -> None:
    """on_ack=delete releases acknowledged files, but not one whose bytes conflicted with those
    already stored (parked aside): neither when acknowledged nor when a restart offers it again."""
    handoff = tmp_path / "handoff"
    handoff.mkdir()
    raw = handoff / f"LSSTCam_{EXPOSURE}_005.fits"
    start = datetime.now(UTC)
    for i, spool in enumerate(("spool-first", "spool", "spool")):
        if i < 2:  # the same CCD written twice: other bytes the second time
            spec = CcdSpec("LSSTCam", EXPOSURE, 5, 20261122, start, 15.0 + i, "r", "small")
            write_raw_ccd(spec, raw)
        settings = edge_settings(tmp_path, handoff).model_copy(
            update={"spool": tmp_path / spool, "on_ack": "delete" if i else "keep"}
        )
        edge = EdgeService(settings, log_level="WARNING").start()
        try:
            wait_for(lambda e=edge: e.journal.counts()["acked"] == 1)
            entry = edge.journal.get(f"LSSTCam/{EXPOSURE}/005")
        finally:
            edge.stop()
        assert entry is not None and entry.status == ("conflict" if i else "stored")
        assert raw.exists()


@pytest.mark.parametrize("journalled", [True, False], ids=["ack-then-unlink", "spill-then-mark"])
def test_a_restart_drops_the_spooled_copy_of_a_ccd_acked_before_a_crash(
    tmp_path: Path, journalled: bool
) -> None:
    """A SIGKILL between the ``acked`` commit and the copy's deletion (the journal names the copy),
    or between a spill and its ``compressed`` mark (the resend, compressed again, was acked and
    the copy is named nowhere) left a whole compressed CCD in the spool for good."""
    handoff = tmp_path / "handoff"
    handoff.mkdir()
    spec = CcdSpec("LSSTCam", EXPOSURE, 3, 20261122, datetime.now(UTC), 15.0, "r", "small")
    write_raw_ccd(spec, handoff / f"LSSTCam_{EXPOSURE}_003.fits")
    settings = edge_settings(tmp_path, handoff)
    key = f"LSSTCam/{EXPOSURE}/003"
    edge = EdgeService(settings, log_level="WARNING").start()
    try:
        wait_for(lambda: edge.journal.counts()["acked"] == 1)
    finally:
        edge.stop()
    copy = spool_path(settings.spool, key)  # the crash, by hand
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(b"\0" * 2880)
    journal = Journal(settings.spool)
    if journalled:
        journal.mark(key, None, spooled=str(copy))
    journal.close()
    EdgeService(settings, log_level="WARNING").start().stop()
    assert not copy.exists()


def test_only_the_copies_of_pending_ccds_stay_in_the_spool(tmp_path: Path) -> None:
    settings = edge_settings(tmp_path, tmp_path / "handoff")
    needed, unneeded = (spool_path(settings.spool, f"LSSTCam/{EXPOSURE}/00{d}") for d in (1, 2))
    needed.parent.mkdir(parents=True)
    for path in (needed, unneeded, needed.with_name(".half-written.tmp")):
        path.write_bytes(b"\0")
    pending = Entry(key=f"LSSTCam/{EXPOSURE}/001", source="raw.fits", state="compressed", spooled=str(needed))
    EdgeService(settings, log_level="WARNING")._drop_unneeded_copies([pending])
    assert [p.name for p in needed.parent.iterdir()] == [needed.name]


def test_a_quarantined_ccd_leaves_no_spooled_copy(tmp_path: Path) -> None:
    settings = edge_settings(tmp_path, tmp_path / "handoff")
    key = f"LSSTCam/{EXPOSURE}/001"
    copy = spool_path(settings.spool, key)
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"\0")
    edge = EdgeService(settings, log_level="WARNING")
    edge.journal = Journal(settings.spool)
    edge.journal.add(Entry(key=key, source=str(tmp_path / "raw.fits"), state="compressed", spooled=str(copy)))
    edge._quarantine(key, PermanentError("bad header"))
    assert edge.journal.counts()["quarantined"] == 1 and not copy.exists()
    edge.journal.close()


def test_a_running_edge_purges_its_journal_every_hour_not_only_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edge runs for weeks: rows acked (and manifests recorded) more than keep_days ago go
    while it runs, else the spool keeps every CCD since the last restart."""
    from producers.edge import service

    settings = edge_settings(tmp_path, tmp_path / "handoff").model_copy(update={"keep_days": 1.0})
    edge = EdgeService(settings, log_level="WARNING")
    edge.journal = journal = Journal(settings.spool)
    edge._purge(time.monotonic())  # what start() does
    old = time.time() - 3 * 86400
    journal.add_many(
        [Entry(key=f"LSSTCam/{EXPOSURE}/{d:03d}", source="x", state="acked", acked_at=old) for d in range(50)]
    )
    journal.record_exposure("LSSTCam", EXPOSURE, "{}")
    journal._db.execute("UPDATE exposures SET seen_at = ?", (old,))
    start = time.monotonic()
    for hours in (0.5, 1.01):
        monkeypatch.setattr(service.time, "monotonic", lambda h=hours: start + h * 3600)
        edge._periodic()
        left = journal.counts()["acked"]
        assert left == (50 if hours < 1 else 0)
    assert journal.exposure_manifest("LSSTCam", EXPOSURE) is None
    journal.close()
