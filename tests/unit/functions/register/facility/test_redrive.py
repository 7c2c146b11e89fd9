"""Redrive decisions and passes with a fake hold subscription and an in-memory bus."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from functions.register.facility.redrive import (
    Decision,
    Redriver,
    decide,
    history,
    matches,
    parked_attributes,
    reason_of,
    redriven_attributes,
    redrives_so_far,
)
from functions.register.facility.settings import RedriveSettings
from obsingest.bus.memory import InMemoryBus
from obsingest.bus.pull import Delivery

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
POLICY = RedriveSettings(max_redrives=3, first_delay=30.0, max_delay=100.0)


def letter(n: int, at: datetime = T0, **attrs: str) -> Delivery:
    base = {
        "objectId": f"raw/x{n}",
        "eventType": "OBJECT_FINALIZE",
        "dlq_reason": "HTTP 503: retriable: registry unavailable after 5 attempts",
        "dlq_status": "503",
        "dlq_attempts": "5",
        "dlq_message_id": f"orig-{n}",
    }
    return Delivery(f"ack-{n}", f"msg-{n}", b'{"name": "raw/x"}', {**base, **attrs}, at)


class FakeHold:
    """A hold subscription: pulled letters are invisible until acked or released (nack 0)."""

    def __init__(self, *letters: Delivery) -> None:
        self.visible = list(letters)
        self.out: dict[str, Delivery] = {}
        self.acked: list[str] = []
        self.released: list[str] = []
        self._lock = threading.Lock()

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]:
        with self._lock:
            batch, self.visible = self.visible[:max_messages], self.visible[max_messages:]
            self.out.update({d.ack_id: d for d in batch})
            return batch

    def ack(self, ack_ids: list[str]) -> None:
        self.acked += ack_ids
        for ack_id in ack_ids:
            self.out.pop(ack_id)

    def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
        assert delay_seconds == 0
        self.released += ack_ids
        self.visible += [self.out.pop(a) for a in ack_ids]


def redriver(hold: FakeHold, bus: InMemoryBus, now: datetime) -> Redriver:
    return Redriver(hold, bus, "ccd-objects", "ccd-objects-dlq-parked", POLICY, clock=lambda: now)


# -- pure decisions ----------------------------------------------------------------------------
def test_a_letter_is_due_after_an_exponentially_growing_delay_then_parked():
    assert [POLICY.delay(n) for n in range(5)] == [30.0, 60.0, 100.0, 100.0, 100.0]
    fresh = {}
    assert decide(fresh, T0, T0 + timedelta(seconds=29), POLICY) is Decision.WAIT
    assert decide(fresh, T0, T0 + timedelta(seconds=30), POLICY) is Decision.REDRIVE
    twice = {"redrive_count": "2"}
    assert decide(twice, T0, T0 + timedelta(seconds=99), POLICY) is Decision.WAIT
    assert decide(twice, T0, T0 + timedelta(seconds=100), POLICY) is Decision.REDRIVE
    spent = {"redrive_count": "3"}
    assert decide(spent, T0, T0, POLICY) is Decision.PARK
    assert decide(spent, T0, T0, POLICY, force=True) is Decision.REDRIVE  # a human decided


def test_redriven_attributes_move_the_dead_lettering_into_the_history():
    first = redriven_attributes(letter(1).attributes, T0)
    assert redrives_so_far(first) == 1
    assert not any(k.startswith("dlq_") for k in first)
    assert first["objectId"] == "raw/x1" and first["eventType"] == "OBJECT_FINALIZE"
    # dead-lettered again later (the relay adds its dlq_* to the redriven attributes)
    again = {**first, "dlq_reason": "no response: ConnectionError", "dlq_status": "none"}
    second = redriven_attributes(again, T0 + timedelta(minutes=1))
    assert redrives_so_far(second) == 2
    [one, two] = history(second)
    assert one["reason"].startswith("HTTP 503") and one["attempts"] == "5"
    assert two["reason"].startswith("no response") and two["status"] == "none"
    assert two["at"] == (T0 + timedelta(minutes=1)).isoformat()


def test_parked_attributes_keep_the_whole_history_and_say_why():
    attrs = redriven_attributes(letter(1).attributes, T0)
    attrs = {**attrs, "dlq_reason": "HTTP 500: boom", "dlq_status": "500"}
    parked = parked_attributes(attrs, T0 + timedelta(minutes=2), T0 + timedelta(minutes=3))
    assert len(history(parked)) == 2
    assert "redriven 1 times" in parked["parked_reason"] and "HTTP 500" in parked["parked_reason"]
    assert parked["parked_at"] == (T0 + timedelta(minutes=3)).isoformat()


def test_history_entries_stay_within_pubsubs_attribute_limit():
    long = letter(1, dlq_reason="HTTP 503: " + "x" * 5000).attributes
    entry = redriven_attributes(long, T0)["redrive_history_1"]
    assert len(entry.encode()) <= 1024 and json.loads(entry)["reason"].startswith("HTTP 503")


def test_reason_and_filter():
    assert reason_of({}) == "unknown (no reason attribute)"
    assert "after 7 delivery" in reason_of({"CloudPubSubDeadLetterSourceDeliveryCount": "7"})
    attrs = letter(1).attributes
    assert matches(attrs, None) and matches(attrs, "registry UNAVAILABLE") and matches(attrs, "503")
    assert not matches(attrs, "no response") and not matches(attrs, "500")


# -- passes ------------------------------------------------------------------------------------
def test_a_pass_redrives_due_letters_parks_spent_ones_and_releases_the_rest():
    due = letter(1)
    spent = letter(2, redrive_count="3")
    young = letter(3, at=T0 + timedelta(seconds=20))
    hold, bus = FakeHold(due, spent, young), InMemoryBus()
    report = redriver(hold, bus, T0 + timedelta(seconds=30)).run_pass()
    assert (report.scanned, report.redriven, report.parked, report.waiting) == (3, 1, 1, 1)
    assert report.next_due == T0 + timedelta(seconds=50)
    [back] = bus.topics["ccd-objects"]
    assert back.data == due.data and back.attributes["redrive_count"] == "1"
    [parked] = bus.topics["ccd-objects-dlq-parked"]
    assert parked.attributes["objectId"] == "raw/x2" and "parked_reason" in parked.attributes
    assert sorted(hold.acked) == ["ack-1", "ack-2"] and hold.released == ["ack-3"]
    assert [d.ack_id for d in hold.visible] == ["ack-3"]  # visible to the next pass


def test_manual_pass_with_a_filter_redrives_only_the_selected_letters_now():
    registry_down = letter(1, at=T0)
    no_answer = letter(2, at=T0, dlq_reason="no response: ConnectionError", dlq_status="none")
    hold, bus = FakeHold(registry_down, no_answer), InMemoryBus()
    report = redriver(hold, bus, T0).run_pass(reason="registry unavailable", force=True)
    assert (report.redriven, report.skipped, report.waiting) == (1, 1, 0)
    assert [m.attributes["objectId"] for m in bus.topics["ccd-objects"]] == ["raw/x1"]
    assert hold.released == ["ack-2"]


def test_dry_run_counts_and_changes_nothing():
    hold, bus = FakeHold(letter(1), letter(2, redrive_count="3")), InMemoryBus()
    report = redriver(hold, bus, T0 + timedelta(hours=1)).run_pass(dry_run=True)
    assert (report.redriven, report.parked, report.dry_run) == (1, 1, True)
    assert report.by_reason == {"HTTP 503": 2}
    assert not bus.topics and hold.acked == [] and sorted(hold.released) == ["ack-1", "ack-2"]


def test_a_letter_that_cannot_be_republished_stays_for_the_next_pass():
    class DownBus(InMemoryBus):
        def publish(self, *args, **kwargs):
            raise RuntimeError("topic not found")

    hold = FakeHold(letter(1))
    report = redriver(hold, DownBus(), T0 + timedelta(hours=1)).run_pass()
    assert (report.failed, report.redriven) == (1, 0)
    assert hold.acked == [] and hold.released == ["ack-1"]


def test_a_pass_sees_each_letter_once_even_if_it_comes_back_during_the_pass():
    class Redelivering(FakeHold):
        def pull(self, max_messages, timeout):
            batch = super().pull(max_messages, timeout)
            if batch:  # the first letter reappears (its ack deadline expired mid-pass)
                again = Delivery("ack-1b", "msg-1", b"{}", dict(batch[0].attributes), T0)
                self.visible.append(again)
            return batch

    hold = Redelivering(letter(1, at=T0 + timedelta(hours=1)))
    report = redriver(hold, InMemoryBus(), T0 + timedelta(hours=1)).run_pass()
    assert report.scanned == 1 and report.waiting == 1
