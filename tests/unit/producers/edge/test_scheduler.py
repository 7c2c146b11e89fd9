"""The scheduler's decisions: newest exposure first, one probe during an outage, full-speed drain
after it, nothing dropped."""

from __future__ import annotations

import pytest

from obsingest.retry import RetryPolicy
from producers.edge.scheduler import Scheduler

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def drain(s: Scheduler) -> list[str]:
    out = []
    while (key := s.pop_due()) is not None:
        out.append(key)
    return out


def test_newest_exposure_first_then_arrival_order() -> None:
    s = Scheduler(clock=Clock())
    for exposure, det in [(1, 0), (1, 1), (3, 0), (2, 0), (3, 1)]:
        s.add(f"e{exposure}/d{det}", exposure)
    assert drain(s) == ["e3/d0", "e3/d1", "e2/d0", "e1/d0", "e1/d1"]


def test_duplicates_are_not_queued_twice() -> None:
    s = Scheduler(clock=Clock())
    assert s.add("a", 1)
    assert not s.add("a", 1)
    assert drain(s) == ["a"]


def test_an_outage_sends_one_probe_at_a_time_with_capped_backoff() -> None:
    clock = Clock()
    s = Scheduler(RetryPolicy(base_delay=1.0, max_delay=4.0), clock=clock)
    for i in range(5):
        s.add(f"k{i}", i)
    in_flight = drain(s)
    assert len(in_flight) == 5
    # every send fails at once: one backoff step, not five
    for key in in_flight:
        s.retry(key)
    assert s.dest_failures == 1
    assert s.pop_due() is None
    assert s.wait_time() == pytest.approx(1.0)
    waits = []
    for _ in range(5):
        clock.now = s.dest_not_before
        probe = s.pop_due()
        assert probe == "k4"  # the newest is the probe
        assert s.pop_due() is None  # only one probe in flight
        waits.append(s.retry(probe))
    assert waits == [2.0, 4.0, 4.0, 4.0, 4.0]
    assert len(s) == 5  # nothing dropped


def test_recovery_drains_everything_at_once_newest_first() -> None:
    clock = Clock()
    s = Scheduler(RetryPolicy(base_delay=1.0, max_delay=4.0), clock=clock)
    for i in range(4):
        s.add(f"k{i}", i)
    for key in drain(s):
        s.retry(key)
    clock.now += 1.0
    probe = s.pop_due()
    assert probe is not None
    s.done(probe)
    assert not s.destination_down
    assert drain(s) == ["k2", "k1", "k0"]


def test_new_live_data_jumps_the_backlog() -> None:
    clock = Clock()
    s = Scheduler(clock=clock)
    for i in range(3):
        s.add(f"old{i}", 10 + i)
    first = s.pop_due()
    s.add("live", 99)
    assert first == "old2"
    assert s.pop_due() == "live"


def test_an_items_own_failure_backs_off_that_item_only() -> None:
    clock = Clock()
    s = Scheduler(RetryPolicy(base_delay=1.0, max_delay=8.0), clock=clock)
    s.add("bad", 5)
    s.add("good", 1)
    assert s.pop_due() == "bad"
    assert s.retry("bad", destination_fault=False) == 1.0
    assert not s.destination_down
    assert s.pop_due() == "good"
    assert s.pop_due() is None
    clock.now += 1.0
    assert s.pop_due() == "bad"


def test_requeue_and_finished() -> None:
    s = Scheduler(clock=Clock())
    s.add("a", 1)
    key = s.pop_due()
    assert key is not None
    s.requeue(key)
    assert s.pop_due() == "a"
    s.finished("a")
    assert len(s) == 0 and not s.in_flight


def test_drop_queued_keeps_in_flight() -> None:
    s = Scheduler(clock=Clock())
    s.add("a", 2)
    s.add("b", 1)
    assert s.pop_due() == "a"
    assert s.drop_queued() == ["b"]
    assert s.in_flight == {"a"}
