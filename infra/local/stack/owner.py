"""Who may stop a service: the owner recorded when it was started, and a log of every stop asked.

A run directory's path outlives its process (a killed session's checkout cloned again, a fork),
so ``Service.stop`` stops a record only for its owner: ``Owner.shared()`` (``obsingest stack
up``, benchmarks, demo; also records whose owner exited or that name none) or a test session's
``Owner.private(label)``; a forked process stops nothing. Every stop asked is one JSON line in
``<run_dir>/stops.log``, so a stack stopped under someone's feet names the culprit.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infra.local.stack import process

if TYPE_CHECKING:
    from infra.local.stack.process import PidRecord

#: the token of the shared stack (``obsingest stack up``); records without an owner count as it
SHARED_TOKEN = "obsingest-stack"
STOP_LOG = "stops.log"
CALLER_FRAMES = 8  # of the asker, in a stop log line


@dataclass(frozen=True)
class Owner:
    """A token and the process holding it (pid and kernel start time: a recycled pid differs)."""

    token: str
    pid: int
    start_ticks: int | None

    @classmethod
    def shared(cls) -> Owner:
        return cls(SHARED_TOKEN, os.getpid(), process.process_start_ticks(os.getpid()))

    @classmethod
    def private(cls, label: str) -> Owner:
        pid = os.getpid()
        return cls(f"{label}:{pid}:{uuid.uuid4().hex[:12]}", pid, process.process_start_ticks(pid))


def may_stop(owner: Owner, record: PidRecord) -> tuple[bool, str]:
    """(allowed, why): the module docstring's rule."""
    if os.getpid() != owner.pid:  # a forked child, or wherever the object was carried to
        return False, f"asked from pid {os.getpid()}, not the owner's process {owner.pid}"
    recorded = record.owner or SHARED_TOKEN
    if recorded == owner.token:
        return True, "own"
    if owner.token == SHARED_TOKEN and (
        record.owner_pid is None or not process.alive(record.owner_pid, record.owner_start_ticks)
    ):
        return True, f"orphan: its owner {recorded} (pid {record.owner_pid}) has exited"
    return False, f"owned by {recorded} (pid {record.owner_pid}), not by {owner.token}"


def log_stop(run_dir: Path, owner: Owner, service: str, record: PidRecord | None, outcome: str) -> None:
    """Append one line to ``<run_dir>/stops.log``: who asked, for which record, what happened."""
    frames = traceback.extract_stack()[:-2][-CALLER_FRAMES:]
    line = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "service": service,
        "outcome": outcome,
        "record": None
        if record is None
        else {"pid": record.pid, "owner": record.owner, "owner_pid": record.owner_pid},
        "asker": {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": sys.argv,
            "owner": owner.token,
            "owner_pid": owner.pid,
        },
        "caller": [f"{f.filename}:{f.lineno} {f.name}" for f in frames],
    }
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / STOP_LOG, "a") as log:
            log.write(json.dumps(line) + "\n")
    except OSError:
        pass  # a missing or read-only run dir must not turn a stop into a failure
