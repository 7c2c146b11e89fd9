"""The canary's verdict from the registry's canary log, with a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from functions.register.facility.canary import CanaryWatch

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def written(watch: CanaryWatch) -> int:
    """Canaries written, by the metric the facility exports."""
    return int(watch.metrics.value("obsingest_notification_canaries_total", event="written"))


@pytest.fixture
def watch(env):
    clock = Clock()
    w = CanaryWatch(env.store, env.registry.audit, "canary/", every=30, timeout=60, clock=clock)
    w.clock_ = clock
    return w


def deliver_canaries(env) -> int:
    """The notification path works: canary events reach the register function."""
    return sum(o.status == "canary" for o in env.deliver_all())


def lose_notifications(env) -> None:
    """The notification path is broken: events never arrive."""
    outbox = env.store.outbox()
    for path, _ in outbox.pending():
        outbox.ack(path)


def test_healthy_while_canaries_come_back_and_seen_objects_are_deleted(env, watch):
    for _ in range(4):
        state = watch.tick()
        assert deliver_canaries(env) == 1
        watch.clock_.advance(30)
        assert state.healthy
    state = watch.tick()
    assert state.healthy and state.overdue == 0 and written(watch) == 5
    assert state.seen_age(watch.clock_.now) is not None
    # every canary already seen was deleted from the bucket (the newest one is still pending)
    listed = [p for p in (env.store.root / "canary").iterdir()]
    assert len(listed) == 1


def test_broken_after_the_timeout_since_the_first_lost_canary_then_healthy_again(env, watch):
    watch.tick()
    deliver_canaries(env)
    watch.clock_.advance(30)
    lost_at = watch.clock_.now
    watch.tick()  # this one is lost
    lose_notifications(env)
    watch.clock_.advance(30)
    state = watch.tick()  # 30 s after: not judged yet
    lose_notifications(env)
    assert state.healthy
    watch.clock_.advance(31)
    state = watch.tick()
    lose_notifications(env)
    assert not state.healthy and state.broken_since == lost_at and state.overdue == 1
    # notifications repaired: the next canary comes back, the pipeline is healthy again
    watch.clock_.advance(30)
    watch.tick()
    assert deliver_canaries(env) == 1
    state = watch.tick()
    assert state.healthy and state.broken_since is None
    assert state.overdue == 2  # the lost ones stay counted (blips), not broken


def test_a_canary_that_cannot_be_written_is_counted_and_not_retried_every_pass(env, watch):
    def refuse(*args, **kwargs):
        raise OSError("disk full")

    env.store.put = refuse
    watch.tick()
    watch.tick()
    assert watch.metrics.count("reconcile", "canary_write_failures") == 1 and written(watch) == 0


def test_a_restarted_watch_deletes_the_canaries_its_crashed_predecessor_left(env) -> None:
    """Canaries are deleted once seen by the watch that wrote them, which keeps their names in
    memory: a facility killed before that left them in the bucket for good (a local store has no
    lifecycle rule). The next watch under the prefix adopts the unseen and the recent ones."""
    clock = Clock()
    first = CanaryWatch(env.store, env.registry.audit, "canary/", every=30, timeout=60, clock=clock)
    first.tick()
    deliver_canaries(env)
    clock.advance(30)
    first.tick()  # deletes the first (seen), writes a second ... and the facility is killed
    [orphan] = (env.store.root / "canary").iterdir()
    second = CanaryWatch(env.store, env.registry.audit, "canary/", every=30, timeout=60, clock=clock)
    for _ in range(3):
        assert deliver_canaries(env) >= 1
        clock.advance(30)
        assert second.tick().healthy
    left = [p.name for p in (env.store.root / "canary").iterdir()]
    assert orphan.name not in left and len(left) == 1  # the newest, not seen yet


def test_a_watch_restarted_minutes_later_still_deletes_a_seen_canary_left_behind(env) -> None:
    """Killed after its canary was seen but before it was deleted, restarted ten minutes later."""
    clock = Clock()
    first = CanaryWatch(env.store, env.registry.audit, "canary/", every=30, timeout=60, clock=clock)
    first.tick()
    assert deliver_canaries(env) == 1  # seen ... and the facility is killed before its next tick
    [left] = (env.store.root / "canary").iterdir()
    clock.advance(600)
    second = CanaryWatch(env.store, env.registry.audit, "canary/", every=30, timeout=60, clock=clock)
    second.tick()
    assert left.name not in [p.name for p in (env.store.root / "canary").iterdir()]
