"""CPU-by-role accounting: /proc parsing, process trees, deltas against the whole machine."""

from __future__ import annotations

import os

import pytest

from producers.transfer import cpu
from producers.transfer.cpu import (
    CpuSample,
    ProcStat,
    delta_seconds,
    descendants,
    parse_machine_stat,
    parse_pid_stat,
    role_ticks,
)

pytestmark = pytest.mark.unit

TICKS = os.sysconf("SC_CLK_TCK")


def test_pid_stat_with_spaces_and_parentheses_in_the_command():
    line = "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 30 12 5 3 20 0 1 0 99 0\n"
    assert parse_pid_stat(line) == ProcStat(pid=4242, ppid=17, ticks=30 + 12 + 5 + 3)


def test_machine_stat_busy_excludes_idle_and_iowait():
    text = "cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
    busy, total = parse_machine_stat(text)
    assert total == 100 + 5 + 50 + 1000 + 20 + 1 + 2 + 3
    assert busy == total - 1000 - 20


def test_machine_stat_refuses_other_text():
    with pytest.raises(ValueError):
        parse_machine_stat("intr 1 2 3\n")


def test_descendants_walk_whole_trees_and_skip_dead_roots():
    stats = [
        ProcStat(1, 0, 0),
        ProcStat(10, 1, 0),
        ProcStat(11, 10, 0),
        ProcStat(12, 11, 0),
        ProcStat(20, 1, 0),
    ]
    assert descendants(stats, [10]) == {10, 11, 12}
    assert descendants(stats, [20, 999]) == {20}


def test_role_ticks_count_each_process_once_in_the_first_role():
    stats = [ProcStat(100, 1, 7), ProcStat(101, 100, 5), ProcStat(200, 1, 3), ProcStat(300, 1, 9)]
    ticks = role_ticks(stats, {"workers": [101], "parent": [100], "db": [200]})
    assert ticks == {"workers": 5, "parent": 7, "db": 3}


def test_delta_seconds_attributes_the_rest_of_the_machine_to_others():
    before = CpuSample({"a": 10, "b": 0}, machine_busy=1000)
    after = CpuSample({"a": 10 + 2 * TICKS, "b": TICKS}, machine_busy=1000 + 5 * TICKS)
    assert delta_seconds(before, after) == pytest.approx({"a": 2.0, "b": 1.0, "others": 2.0, "machine": 5.0})


def test_sample_reads_this_process_from_proc():
    s = cpu.sample({"me": [os.getpid()]})
    assert s.roles["me"] > 0
    assert s.machine_busy > 0
