"""Background processes with recorded pids: spawn, recognise, stop, read their logs.

Each service runs in its own session (process group == leader pid), so a stop kills the whole
group. The pid file also records the leader's kernel start time: a recycled pid is never ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PidRecord:
    """What we know about a process we started: enough to find and stop exactly it."""

    service: str
    pid: int
    pgid: int
    start_ticks: int | None
    argv: list[str]
    log: str
    #: who started it (``infra.local.stack.owner``): only that owner may stop it
    owner: str = ""
    owner_pid: int | None = None
    owner_start_ticks: int | None = None
    #: the TCP ports it was started to listen on (empty in records written before they were kept)
    ports: list[int] = field(default_factory=list)


def _stat(pid: int | str) -> list[str]:
    """Fields 3 (state) onwards of ``/proc/<pid>/stat`` ([] if absent); comm may hold ')'."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _all_stats() -> Iterator[tuple[int, list[str]]]:
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit() and (rest := _stat(entry.name)):
            yield int(entry.name), rest


def _is_zombie(pid: int) -> bool:
    return _stat(pid)[:1] == ["Z"]


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux /proc), None if unknown/absent."""
    try:
        return int(_stat(pid)[19])  # starttime is field 22
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def alive(pid: int, start_ticks: int | None) -> bool:
    """``pid`` runs and, if ``start_ticks`` is known, started then (is not a recycled pid)."""
    return pid_alive(pid) and (start_ticks is None or process_start_ticks(pid) == start_ticks)


def record_alive(record: PidRecord) -> bool:
    return alive(record.pid, record.start_ticks)


def group_alive(pgid: int) -> bool:
    """A non-zombie process remains in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg(0) also succeeds for zombies: look for a live member in /proc
    return not Path("/proc").is_dir() or any(
        rest[2] == str(pgid) and rest[0] != "Z" for _, rest in _all_stats()
    )


def _reap(pid: int) -> None:
    """Collect our own exited child, not to leave a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def read_pid_file(path: Path) -> PidRecord | None:
    """The record ``write_pid_file`` wrote; fields added since (pgid, owner, ports) take defaults."""
    try:
        data = json.loads(path.read_text())
        data = {"pgid": data["pid"], "argv": [], "log": "", **data}
    except (OSError, ValueError, KeyError):
        return None
    return PidRecord(**{f.name: data[f.name] for f in fields(PidRecord) if f.name in data})


def write_pid_file(path: Path, record: PidRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2))
    tmp.replace(path)


def as_user(user: str | None) -> dict[str, Any]:
    """``subprocess`` keyword arguments that run as ``user`` with its group only (None: as us)."""
    return {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []} if user else {}


def spawn(
    service: str,
    argv: Sequence[str],
    *,
    log_path: Path,
    pid_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
    owner: tuple[str, int, int | None] = ("", 0, None),
    ports: Sequence[int] = (),
) -> PidRecord:
    """Start ``argv`` detached in a new session, output appended to ``log_path``; record its pid
    and ``owner`` (token, pid, start ticks of the process that may stop it). The process waits,
    as a shell reading its stdin, for the record to be written before it execs ``argv``: killed
    before that, we leave the shell an end of file, and it exits instead of running a service
    no record knows (a second start failed on its port, or ran the service twice)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        log.write(f"\n=== {stamp} starting: {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", 'read -r go && exec "$@" </dev/null', "sh", *argv],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            close_fds=True,
            **as_user(user),
        )
    # the service outlives the dropped Popen; stop() reaps it if we are its parent
    record = PidRecord(
        service=service,
        pid=proc.pid,
        pgid=proc.pid,
        start_ticks=process_start_ticks(proc.pid),
        argv=list(argv),
        log=str(log_path),
        owner=owner[0],
        owner_pid=owner[1] or None,
        owner_start_ticks=owner[2],
        ports=list(ports),
    )
    write_pid_file(pid_path, record)
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it died: wait_healthy reports it
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    return record


def descendants(pid: int) -> dict[int, int | None]:
    """Every live descendant of ``pid`` with its start ticks (Linux /proc): postgres puts
    children in new sessions, out of a group kill's reach."""
    children: dict[int, list[int]] = {}
    for child, rest in _all_stats():
        children.setdefault(int(rest[1]), []).append(child)
    out: dict[int, int | None] = {}
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        if child in out:
            continue
        out[child] = process_start_ticks(child)
        stack.extend(children.get(child, []))
    return out


def _kill_leftovers(pgid: int, family: dict[int, int | None]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for pid, ticks in family.items():
        if ticks is not None and process_start_ticks(pid) == ticks:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def stop_record(record: PidRecord, sig: int = signal.SIGTERM, timeout: float = 15.0) -> bool:
    """Stop the recorded process, its group and descendants: ``sig``, then SIGKILL. True if
    something was running; a recycled pid (other start time) is left alone."""
    if not record_alive(record):  # the leader is gone: kill its group's orphans
        if group_alive(record.pgid):
            _kill_leftovers(record.pgid, {})
        return False
    family = descendants(record.pid)

    def gone() -> bool:  # pid_alive reaps our own exited child
        if pid_alive(record.pid) or group_alive(record.pgid):
            return False
        return not any(
            ticks is not None and process_start_ticks(pid) == ticks and not _is_zombie(pid)
            for pid, ticks in family.items()
        )

    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone():
            return True
        time.sleep(0.1)
    family.update(descendants(record.pid))
    _kill_leftovers(record.pgid, family)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not gone():
        time.sleep(0.05)
    return True


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
