"""The relay's decisions with fake edges: ack on 2xx, nack with backoff, dead-letter after N."""

from __future__ import annotations

import base64
import threading

import pytest

from infra.local.relay import (
    Action,
    Delivery,
    InProcessTarget,
    PushResult,
    Relay,
    RelaySettings,
    backoff_seconds,
    decide,
    push_envelope,
)
from infra.local.relay.policy import dead_letter_attributes

pytestmark = pytest.mark.unit


class FakeSource:
    """A subscription: messages are redelivered after a nack until acked."""

    def __init__(self, *deliveries: Delivery) -> None:
        self.queue = list(deliveries)
        self.known = {d.ack_id: d for d in deliveries}
        self.acked: list[str] = []
        self.nacked: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]:
        with self._lock:
            batch, self.queue = self.queue[:max_messages], self.queue[max_messages:]
        return batch

    def ack(self, ack_ids: list[str]) -> None:
        with self._lock:
            self.acked += ack_ids

    def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
        with self._lock:
            self.nacked += [(a, delay_seconds) for a in ack_ids]
            # redeliver with a fresh ack id, as Pub/Sub does
            for ack_id in ack_ids:
                d = self.known[ack_id]
                again = Delivery(f"{ack_id}+", d.message_id, d.data, d.attributes, d.publish_time)
                self.known[again.ack_id] = again
                self.queue.append(again)


class ScriptedTarget:
    """Answers each push with the next status (the last one repeats)."""

    def __init__(self, *statuses: int | None) -> None:
        self.statuses = list(statuses)
        self.envelopes: list[dict] = []

    def push(self, envelope: dict) -> PushResult:
        self.envelopes.append(envelope)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if status is None:
            return PushResult(None, error="ConnectionError: refused")
        return PushResult(status, f"body {status}")


class FakeDlq:
    def __init__(self, fail: bool = False) -> None:
        self.published: list[tuple[bytes, dict]] = []
        self.fail = fail

    def publish(self, data: bytes, attributes: dict[str, str]) -> str:
        if self.fail:
            raise RuntimeError("dlq topic unavailable")
        self.published.append((data, attributes))
        return str(len(self.published))


def delivery(n: int = 1, **attrs: str) -> Delivery:
    return Delivery(f"ack-{n}", f"msg-{n}", b'{"name": "raw/x"}', {"objectId": "raw/x", **attrs})


def make(target, *deliveries, max_attempts=3, dlq=None):
    source = FakeSource(*deliveries)
    dlq = dlq or FakeDlq()
    settings = RelaySettings(max_attempts=max_attempts, min_backoff=1.0, max_backoff=8.0)
    relay = Relay(source, target, dlq, settings, subscription_path="projects/p/subscriptions/s")
    return relay, (source, dlq)


# -- pure decisions ---------------------------------------------------------------------------
@pytest.mark.parametrize("status", [200, 201, 204])
def test_2xx_acks(status):
    assert decide(PushResult(status), 1, 3) is Action.ACK


@pytest.mark.parametrize("status", [None, 400, 401, 403, 404, 500, 503])
def test_anything_else_nacks_until_the_limit_then_dead_letters(status):
    result = PushResult(status)
    assert decide(result, 1, 3) is Action.NACK
    assert decide(result, 2, 3) is Action.NACK
    assert decide(result, 3, 3) is Action.DEAD_LETTER


def test_backoff_doubles_in_whole_seconds_and_is_capped():
    assert [backoff_seconds(a, 1.0, 8.0) for a in range(1, 7)] == [1, 2, 4, 8, 8, 8]
    assert backoff_seconds(1, 0.0, 8.0) == 0
    assert backoff_seconds(3, 0.3, 8.0) == 2  # 1.2 s rounds up: never redeliver early
    assert backoff_seconds(30, 100.0, 10_000.0) == 600  # Pub/Sub's maximum ack deadline


def test_envelope_is_what_pubsub_push_posts():
    d = delivery(5, eventType="OBJECT_FINALIZE")
    env = push_envelope(d, "projects/p/subscriptions/s")
    assert env["subscription"] == "projects/p/subscriptions/s"
    msg = env["message"]
    assert base64.b64decode(msg["data"]) == d.data
    assert msg["attributes"]["eventType"] == "OBJECT_FINALIZE"
    assert msg["messageId"] == "msg-5" and msg["publishTime"].endswith("Z")


# -- the relay with fake edges ----------------------------------------------------------------
def test_success_is_acked_once_and_nothing_else():
    relay, (source, dlq) = make(ScriptedTarget(200), delivery(1))
    assert relay.run_once() == 1
    assert source.acked == ["ack-1"] and source.nacked == [] and dlq.published == []
    assert relay.pending_retries == 0


def test_failure_then_success_nacks_with_backoff_then_acks():
    relay, (source, dlq) = make(ScriptedTarget(503, None, 200), delivery(1), max_attempts=5)
    while relay.run_once():
        pass
    assert source.nacked == [("ack-1", 1), ("ack-1+", 2)]
    assert source.acked == ["ack-1++"] and dlq.published == []
    assert relay.counts()["acked"] == 1 and relay.counts()["nacked"] == 2 and relay.pending_retries == 0


def test_always_failing_message_is_dead_lettered_with_reason_and_acked():
    relay, (source, dlq) = make(ScriptedTarget(503), delivery(1), max_attempts=3)
    while relay.run_once():
        pass
    [(data, attrs)] = dlq.published
    assert data == b'{"name": "raw/x"}'
    assert attrs["dlq_attempts"] == "3" and attrs["dlq_status"] == "503"
    assert attrs["dlq_reason"] == "HTTP 503: body 503"
    assert attrs["objectId"] == "raw/x" and attrs["dlq_message_id"] == "msg-1"
    assert source.acked == ["ack-1++"]  # the original is acked only after the DLQ has it
    assert relay.counts()["dead_lettered"] == 1 and relay.pending_retries == 0


@pytest.mark.parametrize("body", ["\ufffd" * 1000, "é" * 1000, "x" * 5000])
def test_the_dead_letter_reason_fits_pubsubs_attribute_limit_in_bytes(body):
    """Pub/Sub refuses an attribute value over 1024 bytes (INVALID_ARGUMENT): a reason cut at
    500 characters is up to 2,000 bytes of UTF-8 (a body decoded with replacement characters is
    3 bytes a character), and the dead letter would fail at every attempt, its reason never kept."""
    attrs = dead_letter_attributes(delivery(1), PushResult(502, body), attempts=3)
    assert all(len(value.encode()) <= 1024 for value in attrs.values())
    assert attrs["dlq_reason"].startswith("HTTP 502: ") and len(attrs["dlq_reason"]) > 300


def test_no_response_is_dead_lettered_with_status_none():
    relay, (_, dlq) = make(ScriptedTarget(None), delivery(1), max_attempts=1)
    relay.run_once()
    [(_, attrs)] = dlq.published
    assert attrs["dlq_status"] == "none" and "ConnectionError" in attrs["dlq_reason"]


def test_pubsub_delivery_attempt_counts_when_higher_than_ours():
    d = Delivery("a", "m", b"x", {}, None, delivery_attempt=3)
    relay, (source, dlq) = make(ScriptedTarget(500), d, max_attempts=3)
    assert relay.handle(d) is Action.DEAD_LETTER
    assert dlq.published and source.acked == ["a"]


def test_a_failed_message_that_never_comes_back_stops_counting_as_pending():
    """After an emulator restart a nacked message never comes back: its count was kept for good,
    so pending_retries never fell to 0 (``obsingest relay --until-idle`` never ended,
    ``wait_idle`` always timed out) and the counts grew with every such message. Long past its
    backoff it is forgotten."""

    class LosingSource(FakeSource):
        def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
            self.nacked += [(a, delay_seconds) for a in ack_ids]  # and the emulator restarts

    now = [1000.0]
    source = LosingSource(delivery(1))
    relay = Relay(source, ScriptedTarget(503), FakeDlq(), RelaySettings(max_attempts=5))
    relay.clock = lambda: now[0]
    relay.run_once()
    assert source.nacked == [("ack-1", 1)] and relay.pending_retries == 1
    now[0] += 60  # a minute past its 1 s backoff: perhaps still coming
    assert relay.pending_retries == 1
    now[0] += 86_400  # a day
    assert relay.pending_retries == 0


def test_if_the_dlq_is_down_the_message_is_kept_not_lost():
    relay, (source, _) = make(ScriptedTarget(503), delivery(1), max_attempts=1, dlq=FakeDlq(True))
    assert relay.handle(source.pull(1, 0)[0]) is Action.NACK
    assert source.acked == [] and relay.pending_retries == 1
    assert source.nacked == [("ack-1", 1)] and relay.counts()["nacked"] == 1  # counted as retried


def test_if_the_dlq_and_the_nack_both_fail_handle_still_answers():
    """Pub/Sub down: the dead letter and the nack fail alike; the message comes back after its
    ack deadline, as after any settle that failed (``run_once`` raised instead)."""

    class NackFails(FakeSource):
        def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
            raise ConnectionError("emulator gone")

    source = NackFails(delivery(1))
    relay = Relay(source, ScriptedTarget(503), FakeDlq(True), RelaySettings(max_attempts=1))
    assert relay.run_once() == 1
    assert source.acked == [] and relay.pending_retries == 1


def test_a_crashing_target_nacks_rather_than_loses():
    class Boom:
        def push(self, envelope):
            raise RuntimeError("bug")

    relay, (source, _) = make(Boom(), delivery(1), max_attempts=5)
    relay.run_once()
    assert source.acked == [] and source.nacked == [("ack-1", 1)]


def test_in_process_target_calls_the_entry_point_with_a_request_like_object():
    seen = {}

    def on_push(request):
        seen["body"] = request.get_json(silent=True)
        seen["auth"] = request.headers.get("Authorization", "")
        return "registered", 200

    target = InProcessTarget(on_push, headers={"Authorization": "Bearer t"})
    result = target.push({"message": {"messageId": "1"}})
    assert result.ok and result.body == "registered"
    assert seen == {"body": {"message": {"messageId": "1"}}, "auth": "Bearer t"}


def test_in_process_target_turns_an_exception_into_a_500():
    def on_push(request):
        raise RuntimeError("db down")

    assert InProcessTarget(on_push).push({}).status == 500


def test_background_relay_drains_many_messages_concurrently():
    deliveries = [delivery(i) for i in range(40)]
    relay, (source, _) = make(ScriptedTarget(200), *deliveries)
    relay.start()
    try:
        assert relay.wait_idle(quiet=0.2, timeout=30)
    finally:
        relay.stop()
    assert sorted(source.acked) == sorted(d.ack_id for d in deliveries)
    assert relay.counts()["acked"] == 40


class CallCountingSource(FakeSource):
    """FakeSource that also keeps each acknowledge call's ids (one entry per round trip)."""

    def __init__(self, *deliveries: Delivery, fail_acks: bool = False) -> None:
        super().__init__(*deliveries)
        self.ack_calls: list[list[str]] = []
        self.fail_acks = fail_acks

    def ack(self, ack_ids: list[str]) -> None:
        self.ack_calls.append(list(ack_ids))
        if self.fail_acks:
            raise ConnectionError("emulator gone")
        super().ack(ack_ids)


def test_background_relay_acks_a_burst_in_few_calls_and_every_one_once():
    deliveries = [delivery(i) for i in range(40)]
    source = CallCountingSource(*deliveries)
    relay = Relay(source, ScriptedTarget(200), FakeDlq(), RelaySettings(ack_linger=0.05))
    relay.start()
    try:
        assert relay.wait_idle(quiet=0.2, timeout=30)
    finally:
        relay.stop()
    assert sorted(source.acked) == sorted(d.ack_id for d in deliveries)  # each once
    assert len(source.ack_calls) < len(deliveries) / 4, source.ack_calls


def test_background_relay_with_no_linger_acks_each_message_by_itself():
    deliveries = [delivery(i) for i in range(10)]
    source = CallCountingSource(*deliveries)
    relay = Relay(source, ScriptedTarget(200), FakeDlq(), RelaySettings(ack_linger=0))
    relay.start()
    try:
        assert relay.wait_idle(quiet=0.2, timeout=30)
    finally:
        relay.stop()
    assert sorted(len(c) for c in source.ack_calls) == [1] * 10


def test_acks_still_waiting_are_sent_at_stop_and_a_failed_batch_is_not_raised():
    from infra.local.relay.loop import AckBatcher

    source = CallCountingSource()
    batcher = AckBatcher(source, linger=30.0).start()
    batcher.add("a")
    batcher.add("b")
    assert batcher.pending == 2
    batcher.stop()  # does not wait out the linger
    assert source.acked == ["a", "b"] and batcher.pending == 0
    failing = CallCountingSource(fail_acks=True)
    batcher = AckBatcher(failing, linger=0.0).start()
    batcher.add("c")
    batcher.stop()
    assert failing.ack_calls == [["c"]] and failing.acked == [] and batcher.pending == 0
