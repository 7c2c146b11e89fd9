"""``--on-ack move`` under SIGKILL: the whole edge killed between a CCD's acknowledgement (its
journal row, durable) and its raw file's move. The next start offers the file again, finds it
acknowledged and moves it: nothing lost, nothing sent twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge.journal import Entry, Journal
from tests.integration.fixtures.edge import ROOT, EdgeProcess, wait_for

pytestmark = pytest.mark.integration

EXPOSURE = 2026112200031
CCDS = 3

#: imported by every Python process of the edge: the first release kills the whole edge
KILL_AT_RELEASE = """\
import os, signal
import producers.edge.service as service

def crash(*args, **kwargs):
    os.killpg(0, signal.SIGKILL)

service.release_raw = crash
"""


def rows(spool: Path) -> dict[str, Entry]:
    journal = Journal(spool)
    try:
        return {entry.key: entry for entry in journal.items()}
    finally:
        journal.close()


def test_a_sigkill_between_the_ack_and_the_move_neither_loses_nor_resends(tmp_path: Path) -> None:
    handoff, spool, store, done = (tmp_path / d for d in ("handoff", "spool", "store", "done"))
    handoff.mkdir()
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_AT_RELEASE)
    edge = EdgeProcess(
        handoff,
        spool,
        f"file://{store}",
        tmp_path / "logs",
        {"PYTHONPATH": f"{hook}:{ROOT}"},
        "--on-ack",
        "move",
        "--done-dir",
        str(done),
        "--workers",
        "1",
        "--min-free-mb",
        "1",
    )
    raws = []
    try:
        edge.start()
        start = datetime(2026, 11, 22, 3, tzinfo=UTC)
        for detector in range(CCDS):
            spec = CcdSpec("LSSTCam", EXPOSURE, detector, 20261122, start, 30.0, "r", size="small")
            raws.append(write_raw_ccd(spec, handoff / f"LSSTCam_{EXPOSURE}_{detector:03d}.fits"))
        assert edge.proc is not None
        assert edge.proc.wait(timeout=120) == -9  # killed at its first release
        before = rows(spool)
        acked = {key: (e.status, e.attempts) for key, e in before.items() if e.state == "acked"}
        assert acked, "no acknowledgement was journalled before the kill"
        assert all(raw.exists() for raw in raws) and not done.exists()  # nothing moved yet

        edge.env["PYTHONPATH"] = str(ROOT)  # the next start: no crash
        edge.start()
        wait_for(lambda: not any(raw.exists() for raw in raws), 90, "every raw file moved to done")
        wait_for(lambda: all(e.state == "acked" for e in rows(spool).values()), 30, "every CCD acked")
    finally:
        edge.close()
    after = rows(spool)
    assert sorted(p.name for p in done.iterdir()) == sorted(raw.name for raw in raws)
    assert len(after) == CCDS and len(list((store / "raw").rglob("*.fits"))) == CCDS
    # acknowledged before the kill: not sent again (same status and attempts, no new ack)
    assert {key: (after[key].status, after[key].attempts) for key in acked} == acked
    second = (edge.log_dir / "edge-2.log").read_text().splitlines()
    resent = {json.loads(line)["data_id"] for line in second if '"event":"edge.acked"' in line}
    assert not resent & set(acked), resent
