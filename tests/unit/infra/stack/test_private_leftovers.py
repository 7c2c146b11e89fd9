"""A test session killed before its ``PrivateStack.down`` leaves a run directory behind; the next
``PrivateStack`` removes those whose maker and services are gone, and only those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.local.stack.process import PidRecord, process_start_ticks, write_pid_file
from tests.integration.fixtures.private_stack import sweep_leftovers

pytestmark = pytest.mark.unit


def _leftover(parent: Path, name: str, maker: int | None, service: int | None) -> Path:
    run_dir = parent / f"obsingest-private-{name}"
    (run_dir / "pids").mkdir(parents=True)
    if maker is not None:
        (run_dir / "maker.json").write_text(
            json.dumps({"pid": maker, "start_ticks": process_start_ticks(maker)})
        )
    if service is not None:
        rec = PidRecord("pubsub", service, service, process_start_ticks(service), [], "")
        write_pid_file(run_dir / "pids" / "pubsub.json", rec)
    return run_dir


def test_only_a_directory_whose_maker_and_services_are_gone_is_removed(tmp_path: Path) -> None:
    # a maker that has exited: its start ticks read while it still runs (a child that exits at
    # once may be reaped before they can be read, and a null record is kept, never judged)
    gone = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ticks = process_start_ticks(gone.pid)
    assert ticks is not None
    gone.communicate(timeout=30)
    me = os.getpid()

    dead = _leftover(tmp_path, "dead", maker=me, service=None)
    # the maker's record names a process that has exited (its pid's start ticks no longer match)
    (dead / "maker.json").write_text(json.dumps({"pid": gone.pid, "start_ticks": ticks}))
    orphaned = _leftover(tmp_path, "orphaned", maker=None, service=me)  # a service still runs
    (orphaned / "maker.json").write_text(json.dumps({"pid": gone.pid, "start_ticks": ticks}))
    _leftover(tmp_path, "in-use", maker=me, service=None)  # between a stop and a start
    _leftover(tmp_path, "unowned", maker=None, service=None)  # no maker's record: not ours to judge
    (tmp_path / "someone-else").mkdir()

    assert sweep_leftovers(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "obsingest-private-in-use",
        "obsingest-private-orphaned",
        "obsingest-private-unowned",
        "someone-else",
    ]
