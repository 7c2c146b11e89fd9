"""Exit codes of ``python -m producers.edge`` that need no running service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from producers.edge.main import EXIT_SPOOL, EXIT_USAGE, main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[4]


def test_a_spool_that_cannot_be_created_exits_73(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["--spool", str(blocker / "spool"), "--to", f"file://{tmp_path}/s", "--health-port", "-1"])
    assert code == EXIT_SPOOL


def test_bad_settings_exit_2(tmp_path: Path) -> None:
    code = main(["--spool", str(tmp_path), "--workers", "0", "--health-port", "-1"])
    assert code == EXIT_USAGE


def test_python_dash_m_runs_the_unit(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "producers.edge", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "--handoff" in out.stdout and "--spool" in out.stdout


def test_refusing_longer_than_max_refusing_exits_75(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "producers.edge",
            "--spool",
            str(tmp_path / "spool"),
            "--to",
            f"file://{tmp_path}/store",
            "--workers",
            "1",
            "--health-port",
            "-1",
            "--min-free-mb",
            "1e12",
            "--max-refusing",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 75, out.stderr[-2000:]
    assert "edge.refusing_new_work" in out.stderr and "edge.giving_up" in out.stderr
