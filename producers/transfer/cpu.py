"""CPU seconds by role during a run, from /proc: *who* used the cores, where wall-clock stage times
say *when* a CCD waited (here every role shares the cores; in production they are separate
machines). Parsing and arithmetic are pure; ``sample`` reads /proc.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    #: user + system CPU ticks of the process itself and of its reaped children
    ticks: int


def parse_pid_stat(text: str) -> ProcStat:
    """One ``/proc/PID/stat`` line (the command may contain spaces and parentheses)."""
    pid = int(text.split(" ", 1)[0])
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is state (field 3); utime/stime/cutime/cstime are fields 14..17
    return ProcStat(pid, ppid=int(fields[1]), ticks=sum(int(x) for x in fields[11:15]))


def parse_machine_stat(text: str) -> tuple[int, int]:
    """(busy, total) ticks of all CPUs from ``/proc/stat``'s first line."""
    first = text.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError("not /proc/stat")
    values = [int(x) for x in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle, sum(values[:8])


def descendants(stats: Iterable[ProcStat], roots: Iterable[int]) -> set[int]:
    """Every pid in the process trees under ``roots`` (roots included, if alive)."""
    children: dict[int, list[int]] = {}
    alive = set()
    for s in stats:
        children.setdefault(s.ppid, []).append(s.pid)
        alive.add(s.pid)
    out: set[int] = set()
    todo = [r for r in roots if r in alive]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, []))
    return out


@dataclass(frozen=True)
class CpuSample:
    """Ticks per watched role (process trees) and of the whole machine, at one moment."""

    roles: dict[str, int]
    machine_busy: int


def role_ticks(stats: list[ProcStat], roles: dict[str, list[int]]) -> dict[str, int]:
    """Ticks of each role's process trees (a pid counted under the first role that has it)."""
    by_pid = {s.pid: s for s in stats}
    seen: set[int] = set()
    out = {}
    for name, roots in roles.items():
        pids = descendants(stats, roots) - seen
        seen |= pids
        out[name] = sum(by_pid[p].ticks for p in pids)
    return out


def delta_seconds(before: CpuSample, after: CpuSample) -> dict[str, float]:
    """CPU seconds between two samples per role, plus ``others`` (the rest of the machine:
    processes outside every watched tree) and ``machine`` (all busy CPU)."""
    out = {name: max(0, after.roles.get(name, 0) - ticks) / _TICKS for name, ticks in before.roles.items()}
    machine = max(0, after.machine_busy - before.machine_busy) / _TICKS
    out["others"] = max(0.0, machine - sum(out.values()))
    out["machine"] = machine
    return out


def _read_stats(proc: Path) -> list[ProcStat]:
    stats = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stats.append(parse_pid_stat((entry / "stat").read_text()))
            except (OSError, ValueError, IndexError):
                continue  # exited while we looked
    return stats


def thread_seconds(pid: int, tids: Iterable[int], proc: Path = Path("/proc")) -> float:
    """User + system CPU seconds of some threads of one process (``/proc/PID/task/TID/stat``); a
    thread that has ended counts 0."""
    total = 0
    for tid in tids:
        try:
            text = (proc / str(pid) / "task" / str(tid) / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def sample(roles: dict[str, list[int]], proc: Path = Path("/proc")) -> CpuSample:
    """Read /proc now: ticks of every role's process trees and of the machine."""
    busy, _ = parse_machine_stat((proc / "stat").read_text())
    return CpuSample(role_ticks(_read_stats(proc), roles), busy)
