"""The local outbox's dispatcher: at-least-once delivery, redelivery after a backoff, then the
dead-letter directory with the reason; one failing event does not hold the others back."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from obsingest.retry import RetryPolicy
from obsingest.store.dispatch import OutboxDispatcher
from obsingest.store.local import LocalDirStore

pytestmark = pytest.mark.unit


def test_a_failing_event_is_redelivered_then_dead_lettered_and_the_rest_go_through(tmp_path) -> None:
    store = LocalDirStore(tmp_path)
    store.put("raw/bad.fits", b"x")
    store.put("raw/good.fits", b"y")
    seen: list[str] = []

    def handler(event: dict[str, Any]) -> None:
        seen.append(event["data"]["name"])
        if event["data"]["name"] == "raw/bad.fits":
            raise RuntimeError("refused")

    policy = RetryPolicy(max_attempts=3, base_delay=0, max_delay=0, jitter=False)
    dispatcher = OutboxDispatcher(store.outbox(), handler, policy)
    assert dispatcher.drain_once() == 1  # the good one; the bad one waits for its retry
    assert dispatcher.drain_once() == 0
    assert dispatcher.drain_once() == 1  # third failure: dead-lettered
    assert seen.count("raw/bad.fits") == 3 and seen.count("raw/good.fits") == 1
    assert (dispatcher.delivered, dispatcher.dead_lettered) == (1, 1)
    assert store.outbox().pending() == []
    [letter] = (tmp_path / ".notifications-dlq").glob("*.json")
    assert json.loads(letter.read_text())["deadLetter"] == {"reason": "RuntimeError: refused", "attempts": 3}


def test_a_retry_waits_for_its_backoff(tmp_path) -> None:
    store = LocalDirStore(tmp_path)
    store.put("raw/x.fits", b"x")
    calls: list[int] = []

    def handler(_event: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("once")

    policy = RetryPolicy(max_attempts=3, base_delay=0.3, max_delay=0.3, jitter=False)
    dispatcher = OutboxDispatcher(store.outbox(), handler, policy)
    assert dispatcher.drain_once() == 0 and dispatcher.drain_once() == 0
    assert len(calls) == 1  # not before its backoff has passed
    time.sleep(0.35)
    assert dispatcher.drain_once() == 1 and dispatcher.delivered == 1
