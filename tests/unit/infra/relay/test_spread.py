"""Pushing to several function instances: deliveries spread round-robin, a delivery whose
instance does not answer goes to the next one in the same push, a dead instance is passed over
while it cools down, and the relay never nacks what a live instance took."""

from __future__ import annotations

import pytest

from infra.local.relay import Delivery, PushResult, Relay, RelaySettings
from infra.local.relay.spread import SpreadPushTarget, instance_failed
from infra.local.relay.wiring import push_target
from tests.unit.infra.relay.test_relay import FakeDlq, FakeSource, ScriptedTarget

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_only_a_missing_answer_or_a_gateway_error_fails_over():
    assert instance_failed(PushResult(None, error="ConnectionError"))
    assert instance_failed(PushResult(502)) and instance_failed(PushResult(504))
    for status in (200, 204, 400, 403, 500, 503):
        assert not instance_failed(PushResult(status))


def test_deliveries_are_spread_over_the_instances():
    a, b = ScriptedTarget(200), ScriptedTarget(200)
    spread = SpreadPushTarget([a, b])
    assert all(spread.push({"n": n}).ok for n in range(10))
    assert (len(a.envelopes), len(b.envelopes), spread.failovers) == (5, 5, 0)


def test_a_dead_instance_costs_a_delivery_no_retry_and_is_passed_over_while_it_cools():
    clock = Clock()
    dead, live = ScriptedTarget(None), ScriptedTarget(200)
    spread = SpreadPushTarget([dead, live], cooldown=0.5, max_cooldown=4.0, clock=clock)
    results = [spread.push({"n": n}) for n in range(6)]
    assert all(r.ok for r in results)  # every one delivered by this push, none left to a retry
    assert len(dead.envelopes) == 1 and len(live.envelopes) == 6 and spread.failovers == 1
    clock.now += 0.6  # its cooldown is over: a real delivery tries it again, still dead
    assert all(spread.push({"n": n}).ok for n in range(2))
    assert len(dead.envelopes) == 2 and spread.failovers == 2
    clock.now += 0.6  # the cooldown doubled (1 s): not yet
    assert all(spread.push({"n": n}).ok for n in range(2))
    assert len(dead.envelopes) == 2
    dead.statuses = [200]  # back
    clock.now += 0.5
    assert all(spread.push({"n": n}).ok for n in range(4))
    assert len(dead.envelopes) == 4  # tried first again after its cooldown, then its turns


def test_the_pushes_in_flight_when_an_instance_died_count_as_one_failure():
    clock = Clock()
    spread = SpreadPushTarget([ScriptedTarget(200)], cooldown=0.5, max_cooldown=2.0, clock=clock)
    started = clock.now
    clock.now += 0.1  # eight pushes were in flight; the first to fail marks the instance down
    for _ in range(8):
        spread._failed(0, started)
    assert spread._down[0][:2] == (clock.now + 0.5, 0.5)
    clock.now += 0.6
    spread._failed(0, clock.now)  # a probe after the cooldown failed: now it doubles
    assert spread._down[0][1] == 1.0
    for _ in range(3):
        clock.now += 5.0
        spread._failed(0, clock.now)
    assert spread._down[0][1] == 2.0  # at most max_cooldown


def test_a_recovering_instance_is_probed_by_one_delivery_at_a_time() -> None:
    clock = Clock()
    held: list[list[int]] = []
    recovering, live = ScriptedTarget(200), ScriptedTarget(200)
    spread = SpreadPushTarget([recovering, live], cooldown=0.5, clock=clock)
    spread._failed(0, clock.now)
    clock.now += 0.6  # its cooldown is over

    class Slow:
        """The recovering instance answering its probe while other deliveries arrive."""

        def push(self, envelope):
            held.append([spread.order()[0] for _ in range(4)])
            return recovering.push(envelope)

    spread.targets[0] = Slow()
    assert spread.push({}).ok  # the probe: first to the recovering instance
    assert held == [[1, 1, 1, 1]]  # meanwhile every other delivery went to the live one first
    assert len(recovering.envelopes) == 1 and 0 not in spread._down  # answered: back in turn
    assert sorted(spread.order()[0] for _ in range(2)) == [0, 1]


def test_a_retry_later_from_the_function_is_the_relays_to_decide():
    busy, live = ScriptedTarget(503), ScriptedTarget(200)
    spread = SpreadPushTarget([busy, live])
    assert spread.push({}).status == 503 and spread.failovers == 0


def test_when_every_instance_fails_the_push_fails_with_the_last_answer():
    spread = SpreadPushTarget([ScriptedTarget(None), ScriptedTarget(502)])
    result = spread.push({})
    assert result.status == 502 and spread.failovers == 1


def test_the_relay_acks_at_the_first_attempt_what_a_live_instance_took():
    deliveries = [Delivery(f"a{n}", f"m{n}", b"x", {}, None) for n in range(8)]
    source = FakeSource(*deliveries)
    dead, live = ScriptedTarget(None), ScriptedTarget(200)
    relay = Relay(source, SpreadPushTarget([dead, live]), FakeDlq(), RelaySettings())
    assert relay.run_once() == 8
    assert sorted(source.acked) == sorted(d.ack_id for d in deliveries)
    assert source.nacked == [] and relay.counts()["nacked"] == 0


def test_settings_with_several_urls_build_a_spread_target():
    single = push_target(RelaySettings(push_url="http://127.0.0.1:1/"))
    assert not isinstance(single, SpreadPushTarget)
    spread = push_target(RelaySettings(push_urls=("http://127.0.0.1:1/", "http://127.0.0.1:2/")))
    assert isinstance(spread, SpreadPushTarget)
    assert [t.url for t in spread.targets] == ["http://127.0.0.1:1/", "http://127.0.0.1:2/"]
