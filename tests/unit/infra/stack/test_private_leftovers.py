"""A test session killed before its ``PrivateStack.down`` leaves a run directory behind; the next
``PrivateStack`` removes those whose services and session are gone, and only those."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from infra.local.stack.process import PidRecord, process_start_ticks, spawn, stop_record, write_pid_file
from tests.integration.fixtures.private_stack import sweep_leftovers

pytestmark = pytest.mark.unit


def _record(run_dir: Path, pid: int, owner_pid: int | None) -> None:
    owner_ticks = process_start_ticks(owner_pid) if owner_pid else None
    rec = PidRecord("pubsub", pid, pid, process_start_ticks(pid), [], "", "private", owner_pid, owner_ticks)
    write_pid_file(run_dir / "pids" / "pubsub.json", rec)


def test_only_what_no_live_process_or_session_holds_is_removed(tmp_path: Path) -> None:
    dead = tmp_path / "obsingest-private-dead"
    gone = spawn(
        "x", [sys.executable, "-c", "pass"], log_path=tmp_path / "x.log", pid_path=tmp_path / "x.json"
    )
    time.sleep(0.5)
    stop_record(gone, timeout=1)
    _record(dead, gone.pid, owner_pid=gone.pid)  # its service and its session both exited

    serving = tmp_path / "obsingest-private-serving"
    _record(serving, os.getpid(), owner_pid=None)  # a service still running
    session = tmp_path / "obsingest-private-session"
    _record(session, gone.pid, owner_pid=os.getpid())  # between a stop and a start of a live session
    fresh = tmp_path / "obsingest-private-fresh"
    fresh.mkdir()  # being made right now: nothing recorded yet
    old = tmp_path / "obsingest-private-old"
    old.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    other = tmp_path / "someone-else"
    other.mkdir()

    assert sorted(sweep_leftovers(tmp_path)) == sorted([dead, old])
    assert {p.name for p in tmp_path.iterdir() if p.is_dir()} == {
        "obsingest-private-serving",
        "obsingest-private-session",
        "obsingest-private-fresh",
        "someone-else",
    }
