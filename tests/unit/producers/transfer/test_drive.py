"""One harness run's bookkeeping without processes: CPU by phase (busy while an exposure is in
flight, idle until the next readout) and the edge service's threads taken out of the facility
process's CPU."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from producers.transfer.cpu import CpuSample
from producers.transfer.drive import Run, _split_edge_service
from producers.transfer.harness import HarnessConfig

pytestmark = pytest.mark.unit

TICKS = os.sysconf("SC_CLK_TCK")


def test_the_edge_service_threads_move_out_of_the_facility_process() -> None:
    used = {"facility_process": 3.0, "gcs": 1.0, "edge_workers": 2.0, "others": 0.5}
    out = _split_edge_service(used, 0.5)
    assert list(out)[:2] == ["edge_workers", "edge_service"]
    assert out["edge_service"] == 0.5 and out["facility_process"] == pytest.approx(2.5)
    assert out["gcs"] == 1.0 and out["others"] == 0.5
    # never more than the process itself used (tick granularity)
    assert _split_edge_service({"facility_process": 0.1}, 0.3)["edge_service"] == 0.1


def sample(edge: int, gcs: int, busy: int) -> CpuSample:
    return CpuSample({"edge_workers": edge, "facility_process": 0, "gcs": gcs}, busy)


def test_phases_split_busy_and_idle_windows(tmp_path: Path) -> None:
    run = Run(
        HarnessConfig("file:///x", ccds=2, numexp=2, interval=17.0, run_dir=tmp_path),
        None,
        lambda *_: None,
        {},
    )
    t = TICKS
    run._marks = [
        ("start", -1, 0.0, sample(0, 0, 0), 0.0),
        ("readout", 0, 1.0, sample(0, 0, 0), 0.0),
        ("complete", 0, 3.0, sample(2 * t, t, 4 * t), 0.25),
        ("readout", 1, 18.0, sample(2 * t, 2 * t, 6 * t), 0.25),
        ("complete", 1, 19.5, sample(4 * t, 3 * t, 9 * t), 0.5),
    ]
    first, second = run.phases()
    assert first["busy_seconds"] == 2.0 and first["idle_seconds"] == 15.0
    assert first["busy"]["edge_workers"] == 2.0 and first["busy"]["gcs"] == 1.0
    assert first["busy"]["edge_service"] == 0.0  # no facility CPU to take it from
    assert first["busy"]["others"] == pytest.approx(1.0)  # 4 busy - 3 of ours
    assert first["idle"]["gcs"] == 1.0 and first["idle"]["edge_workers"] == 0.0
    assert second["busy_seconds"] == 1.5 and "idle" not in second
    assert second["busy"]["edge_workers"] == 2.0


def test_a_run_refuses_impossible_counts(tmp_path: Path) -> None:
    def make(**kw: int) -> Run:
        values: dict[str, Any] = {"ccds": 2, "numexp": 2, **kw}
        return Run(
            HarnessConfig("file:///x", interval=1.0, run_dir=tmp_path, **values), None, lambda *_: None, {}
        )

    with pytest.raises(ValueError, match=r"1\.\.189"):
        make(ccds=190)
    with pytest.raises(ValueError, match="numexp"):
        make(numexp=0)
    with pytest.raises(ValueError, match="workers"):
        make(workers=0)
    assert make(ccds=24).workers == min(24, os.cpu_count() or 1)


def test_a_new_run_removes_what_a_killed_run_staged(tmp_path: Path) -> None:
    """A run killed (SIGKILL, the OOM killer) never reaches its ``finally``: its staged CCDs
    (gigabytes at full size) and spool stayed under the run directory for good, one set a kill.
    The next run removes those of runs whose process is gone, and keeps a live run's."""
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead, live = int(gone.stdout), os.getpid()
    for kind in ("handoff", "spool"):
        for pid in (dead, live):
            left = tmp_path / kind / f"20261122T030000-{pid}" / "2026112200001"
            left.mkdir(parents=True)
            (left / "MC_O_20261122_000001_R22_S11.fits").write_bytes(b"x" * 2880)
    Run(
        HarnessConfig("file:///x", ccds=1, numexp=1, interval=1.0, run_dir=tmp_path),
        None,
        lambda *_: None,
        {},
    )
    for kind in ("handoff", "spool"):
        assert [p.name for p in (tmp_path / kind).iterdir()] == [f"20261122T030000-{live}"]
