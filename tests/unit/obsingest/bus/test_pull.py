"""PubSubPullSource: long-poll against Pub/Sub, short polls against the emulator (whose long
poll sleeps a fixed 500 ms instead of waking when a message arrives)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from obsingest.bus.direct_rpc import DirectRpcs
from obsingest.bus.pull import (
    EMULATOR_POLL_SECONDS,
    SUBSCRIBER_MAX_ATTEMPTS,
    Delivery,
    PubSubPullSource,
    SubscriberThread,
)

pytestmark = pytest.mark.unit


def _received(n: int) -> SimpleNamespace:
    message = SimpleNamespace(message_id=f"m{n}", data=b"x", attributes={}, publish_time=None)
    return SimpleNamespace(ack_id=f"a{n}", message=message, delivery_attempt=0)


class FakeSubscriber:
    """Empty for ``empty_pulls`` pulls, then one message per pull."""

    def __init__(self, empty_pulls: int) -> None:
        self.empty_pulls = empty_pulls
        self.requests: list[dict] = []

    def pull(self, request: dict, timeout: float) -> SimpleNamespace:
        self.requests.append(request)
        if len(self.requests) <= self.empty_pulls:
            return SimpleNamespace(received_messages=[])
        return SimpleNamespace(received_messages=[_received(len(self.requests))])


def test_against_pubsub_one_long_poll_per_call(monkeypatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    client = FakeSubscriber(empty_pulls=1)
    source = PubSubPullSource("p", "s", client=client)
    assert source.poll_interval is None
    assert source.pull(10, 2.0) == []  # the service's long poll came back empty
    assert client.requests == [{"subscription": "projects/p/subscriptions/s", "max_messages": 10}]


def test_against_the_emulator_polls_until_a_message_is_there(monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    client = FakeSubscriber(empty_pulls=3)
    source = PubSubPullSource("p", "s", client=client)
    assert source.poll_interval == EMULATOR_POLL_SECONDS
    got = source.pull(10, 5.0)
    assert [d.message_id for d in got] == ["m4"]
    assert len(client.requests) == 4
    assert all(r["return_immediately"] for r in client.requests)


def test_polling_gives_up_at_the_timeout(monkeypatch):
    client = FakeSubscriber(empty_pulls=10**6)
    source = PubSubPullSource("p", "s", client=client, poll_interval=0.01)
    assert source.pull(10, 0.2) == []
    assert len(client.requests) >= 2  # it polled again, then stopped: the call returned


def test_polls_back_off_while_idle_and_speed_up_after_a_message():
    client = FakeSubscriber(empty_pulls=10**6)
    source = PubSubPullSource("p", "s", client=client, poll_interval=0.001, max_poll_interval=0.004)
    assert source.pull(10, 0.1) == []  # empty polls, 1 + 2 + 4 + 4 ... ms apart
    assert source._wait == 0.004  # backed off to the ceiling
    client.empty_pulls = 0
    assert source.pull(10, 5.0)  # a message at last
    assert source._wait == 0.001  # next polls are quick again


def test_a_direct_pull_reads_the_raw_protobuf_answer() -> None:
    """The direct RPC answers raw protobufs (no proto-plus): every field of a Delivery is read
    from them as from the generated method's answer, an unset publish time as None."""
    from datetime import UTC, datetime

    from google.pubsub_v1.types import PullRequest, PullResponse

    answer = PullResponse.pb()()
    first = answer.received_messages.add(ack_id="a1", delivery_attempt=3)
    first.message.message_id = "m1"
    first.message.data = b"payload"
    first.message.attributes["objectId"] = "raw/x.fits"
    first.message.publish_time.FromDatetime(datetime(2026, 11, 22, 1, 2, 3, 456000))
    answer.received_messages.add(ack_id="a2").message.message_id = "m2"
    asked = []

    def pull(request: object, timeout: float) -> object:
        asked.append(request)
        return answer

    source = PubSubPullSource("p", "s", client=FakeSubscriber(empty_pulls=0))
    source._direct = DirectRpcs(channel=None)  # the RPC itself, as without an injected client
    source._direct._rpcs["pull"] = pull
    got = source.pull(5, 1.0)
    assert asked == [PullRequest.pb()(subscription=source.path, max_messages=5)]
    assert [(d.ack_id, d.message_id, d.data, d.attributes, d.delivery_attempt) for d in got] == [
        ("a1", "m1", b"payload", {"objectId": "raw/x.fits"}, 3),
        ("a2", "m2", b"", {}, 0),
    ]
    assert got[0].publish_time == datetime(2026, 11, 22, 1, 2, 3, 456000, tzinfo=UTC)
    assert got[1].publish_time is None


class RedeliveringSource:
    """A subscription without a dead-letter policy: what is not acked comes back at the next
    pull (its ack deadline passed), with a fresh ack id, until ``limit`` deliveries."""

    path = "projects/p/subscriptions/s"
    client = SimpleNamespace(
        get_subscription=lambda request: SimpleNamespace(topic="t", ack_deadline_seconds=10)
    )

    def __init__(self, *message_ids: str, limit: int = 50) -> None:
        self.pending = list(message_ids)
        self.deliveries: dict[str, int] = {}
        self.acked: list[str] = []
        self.limit = limit
        self.settled = threading.Event()  # everything acked, or redelivered ``limit`` times

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]:
        if self.settled.is_set() or not self.pending:
            self.settled.set()
            return []
        for m in self.pending:
            self.deliveries[m] = self.deliveries.get(m, 0) + 1
            if self.deliveries[m] >= self.limit:
                self.settled.set()
        return [Delivery(f"{m}:{self.deliveries[m]}", m, m.encode()) for m in self.pending]

    def ack(self, ack_ids: list[str]) -> None:
        self.acked += ack_ids
        self.pending = [m for m in self.pending if all(a.split(":")[0] != m for a in ack_ids)]

    def close(self) -> None:
        pass


def test_a_message_whose_callback_always_fails_is_dropped_after_some_attempts(monkeypatch):
    """Its subscription (``provision.subscribe``) has no dead-letter policy: a message the
    callback always fails on would come back every ack deadline for good. It is given up, with
    an error, after SUBSCRIBER_MAX_ATTEMPTS deliveries; the good one behind it is handled once."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")  # a client that never connects
    handled: list[str] = []

    def callback(delivery: Delivery) -> None:
        if delivery.message_id == "poison":
            raise RuntimeError("observer bug")
        handled.append(delivery.message_id)

    subscriber = SubscriberThread("p", "s", callback)
    source = subscriber.source = RedeliveringSource("poison", "good")
    subscriber.start()
    try:
        assert source.settled.wait(30)
    finally:
        subscriber.stop()
    assert source.deliveries == {"poison": SUBSCRIBER_MAX_ATTEMPTS, "good": 1}
    assert handled == ["good"] and sorted(source.acked) == ["good:1", f"poison:{SUBSCRIBER_MAX_ATTEMPTS}"]
    assert subscriber._failures == {}  # nothing kept for a message given up
