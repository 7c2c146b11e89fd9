"""The spool on a small filesystem that fills up (new CCDs refused loudly, nothing journalled
lost, resumes when space returns), and bad input at the edge (truncated, deleted before read,
never completed, badly named): each quarantined with its reason, every other CCD unaffected.

Facility side: a file:// store whose finalize outbox feeds the register function in-process,
with a real PostgreSQL registry.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.fileio import write_atomic
from producers.daq.night import NightPlan, play_night
from producers.daq.simulator import CcdSpec, generate_raw_ccd
from producers.edge.journal import Entry, Journal
from tests.integration.fixtures.edge import (
    EdgeProcess,
    LocalFacility,
    journal_counts,
    journal_items,
    wait_for,
)

pytestmark = pytest.mark.integration

DAY_OBS = 20261122


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (we are root), unmounted afterwards whatever happens."""
    mount = tmp_path / "spool"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path, leave: int) -> Path:
    """A filler file that leaves ``leave`` bytes free on ``path``'s filesystem."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler"
    with filler.open("wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return filler


def test_a_full_spool_refuses_new_work_keeps_the_journal_and_resumes(
    postgres: str, small_fs: Path, tmp_path: Path
) -> None:
    facility = LocalFacility(tmp_path / "store", postgres)
    handoff = tmp_path / "handoff"
    edge = EdgeProcess(handoff, small_fs, facility.store_url, tmp_path / "logs", None,
                       "--min-free-mb", "1", "--rescan-interval", "2")  # fmt: skip
    try:
        edge.start()
        first = NightPlan(handoff, "LSSTCam", 2, 5, interval=0.2, day_obs=DAY_OBS, first_seq=10)
        play_night(first)
        wait_for(lambda: journal_counts(small_fs)["acked"] == 10, 60, "the first 10 CCDs")
        filler = fill(small_fs, leave=512 * 1024)  # below the 1 MiB floor
        play_night(NightPlan(handoff, "LSSTCam", 2, 5, interval=0.2, day_obs=DAY_OBS,
                             first_seq=20))  # fmt: skip
        wait_for(lambda: (edge.health() or {}).get("refusing_new_work") is True, 30,
                 "the edge to refuse new work")  # fmt: skip
        time.sleep(3)  # a rescan or two while full: still refused, nothing half-taken
        health = edge.health()
        assert health is not None and health["status"] == "degraded"
        assert any(r.startswith("spool-full") for r in health["reasons"]), health
        assert health["journal"]["acked"] == 10  # nothing already journalled lost
        assert sum(health["journal"].values()) == 10  # the new CCDs were not half-taken
        refusals = edge.events("edge.refusing_new_work")
        assert refusals and refusals[0]["level"] == "error" and "spool" in refusals[0]["error"]
        assert len(list(handoff.rglob("LSSTCam_*_0*.fits"))) == 20  # still in the hand-off

        filler.unlink()  # space returns
        wait_for(lambda: journal_counts(small_fs)["acked"] == 20, 60, "the refused CCDs")
        assert edge.events("edge.resumed_new_work")
        assert (edge.health() or {})["status"] == "ready"
        assert edge.terminate() == 0
        facility.close()
        assert facility.registry.count_datasets() == 20
        assert Counter(facility.arrivals.keys()).most_common(1)[0][1] == 1
    finally:
        edge.close()


def raw(exposure: int, detector: int) -> bytes:
    spec = CcdSpec("LSSTCam", exposure, detector, DAY_OBS, datetime.now(UTC), 15.0, "r", "small")
    return generate_raw_ccd(spec)


def test_bad_files_are_quarantined_with_their_reason_and_the_rest_flows(
    postgres: str, tmp_path: Path
) -> None:
    facility = LocalFacility(tmp_path / "store", postgres)
    handoff, spool = tmp_path / "handoff", tmp_path / "spool"
    exposure = DAY_OBS * 100_000 + 50
    # Deleted before it was read: journalled by an edge that then died, gone when it resumes.
    gone = handoff / f"LSSTCam_{exposure}_007.fits"
    write_atomic(gone, raw(exposure, 7))
    Journal(spool).add(Entry(key=f"LSSTCam/{exposure}/007", source=str(gone), priority=exposure,
                             readout=time.time()))  # fmt: skip
    gone.unlink()
    # Never completed: the writer left its temporary file behind.
    stale = handoff / f".LSSTCam_{exposure}_008.fits.x7k2.tmp"
    stale.write_bytes(raw(exposure, 8)[:5000])
    edge = EdgeProcess(handoff, spool, facility.store_url, tmp_path / "logs", None,
                       "--incomplete-timeout", "3", "--rescan-interval", "1")  # fmt: skip
    try:
        edge.start()
        good = NightPlan(handoff, "LSSTCam", 2, 5, interval=0.5, day_obs=DAY_OBS, first_seq=51)
        play_night(good)
        # Truncated: a complete hand-off whose bytes stop half-way (source host died mid-file).
        write_atomic(handoff / f"LSSTCam_{exposure}_009.fits", raw(exposure, 9)[:100_000])
        # Badly named.
        write_atomic(handoff / "flat_r_01.fits", raw(exposure, 1))
        wait_for(lambda: journal_counts(spool)["acked"] == 10
                 and journal_counts(spool)["quarantined"] == 4, 60,
                 "10 good CCDs acked and 4 bad files quarantined")  # fmt: skip
        assert edge.terminate() == 0
        facility.close()
        reasons = {i.key.rsplit("/", 1)[-1]: (i.reason, i.error)
                   for i in journal_items(spool) if i.state == "quarantined"}  # fmt: skip
        by_reason = {r for r, _ in reasons.values()}
        assert by_reason == {"source-vanished", "never-completed", "corrupt-file",
                             "bad-file-name"}, reasons  # fmt: skip
        assert "truncated" in reasons["009"][1] and "LSSTCam_" in reasons["009"][1]
        assert "vanished" in reasons["007"][1]
        # each bad file moved aside with its reason; the good ones registered exactly once
        moved = {p.name for p in (handoff / "quarantine").rglob("*") if p.is_file()}
        assert f"LSSTCam_{exposure}_009.fits" in moved and "flat_r_01.fits" in moved
        assert stale.name in moved and f"{stale.name}.reason.json" in moved
        assert facility.registry.count_datasets() == 10
        assert facility.registry.quarantined() == []
        assert len(set(facility.arrivals.keys())) == len(facility.arrivals.keys()) == 10
    finally:
        edge.close()
