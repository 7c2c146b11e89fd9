"""``obsingest edge release``: CCDs an earlier edge quarantined as ``unexpected-error`` (a full
destination disk before issue 21) go back into the hand-off and a running edge sends them; a CCD
quarantined for a reason of its own (``corrupt-file``) stays where it is."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile
from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge.errors import UnexpectedError
from producers.edge.files import move_to_quarantine
from producers.edge.journal import Entry, Journal
from tests.integration.fixtures.edge import ROOT, EdgeProcess, wait_for

pytestmark = pytest.mark.integration

EXPOSURE = 2026112200007


def ccd(handoff: Path, detector: int) -> tuple[str, Path]:
    spec = CcdSpec(
        "LSSTCam",
        EXPOSURE,
        detector,
        20261122,
        datetime(2026, 11, 22, 3, tzinfo=UTC),
        30.0,
        "r",
        size="small",
    )
    path = write_raw_ccd(spec, handoff / f"LSSTCam_{EXPOSURE}_{detector:03d}.fits")
    return DataId("LSSTCam", EXPOSURE, detector).key, path


def quarantine_as_before(spool: Path, handoff: Path, key: str, path: Path, error) -> None:
    """What the edge before issue 21 left behind: the journal entry quarantined with the
    reason, the raw file under HANDOFF/quarantine/ with its .reason.json."""
    journal = Journal(spool)
    try:
        journal.add(Entry(key=key, source=str(path), priority=EXPOSURE, readout=0.0))
        journal.mark(key, "quarantined", durable=True, reason=error.reason, error=str(error))
    finally:
        journal.close()
    move_to_quarantine(handoff, path, error)


def state(spool: Path, key: str) -> str:
    journal = Journal(spool)
    try:
        entry = journal.get(key)
        return entry.state if entry else "absent"
    finally:
        journal.close()


def test_release_sends_ccds_quarantined_for_a_full_disk_and_keeps_bad_ones(tmp_path: Path) -> None:
    handoff, spool, store = (tmp_path / n for n in ("handoff", "spool", "store"))
    handoff.mkdir()
    spool.mkdir()
    full_disk = UnexpectedError("OSError: [Errno 28] No space left on device")
    wrongly = [ccd(handoff, d) for d in range(3)]
    for key, path in wrongly:
        quarantine_as_before(spool, handoff, key, path.resolve(), full_disk)
    bad_key, bad_path = ccd(handoff, 9)
    quarantine_as_before(spool, handoff, bad_key, bad_path.resolve(), CorruptFile("truncated"))
    assert not list(handoff.glob("*.fits"))

    edge = EdgeProcess(
        handoff, spool, f"file://{store}", tmp_path / "logs", None, "--workers", "1", "--rescan-interval", "2"
    )
    try:
        edge.start()
        assert all(state(spool, key) == "quarantined" for key, _ in wrongly)  # not by itself
        cmd = [
            sys.executable,
            "-m",
            "obsingest_cli.main",
            "edge",
            "release",
            "--handoff",
            str(handoff),
            "--spool",
            str(spool),
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "3 of 3 quarantined CCD(s) released" in done.stdout
        wait_for(
            lambda: all(state(spool, k) == "acked" for k, _ in wrongly), 60, "the released CCDs acknowledged"
        )
    finally:
        edge.close()
    for key, path in wrongly:
        instrument, exposure, detector = key.split("/")
        stored = DataId(instrument, int(exposure), int(detector)).identity().file_name
        assert list(store.rglob(stored)), f"{key} not stored (as {stored})"
        assert path.exists() and not (handoff / "quarantine" / path.name).exists()
    assert state(spool, bad_key) == "quarantined"
    assert (handoff / "quarantine" / bad_path.name).exists()
    assert (handoff / "quarantine" / f"{bad_path.name}.reason.json").exists()
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "0 of 0" in again.stdout  # nothing left to release
