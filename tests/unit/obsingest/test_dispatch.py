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


NO_RETRY = RetryPolicy(max_attempts=1, base_delay=0, max_delay=0, jitter=False)


def _names(seen: list[str]):
    def handler(event: dict[str, Any]) -> None:
        seen.append(event["data"]["name"])

    return handler


@pytest.mark.parametrize("bad", [b"[1, 2]", b"null", b'"text"', b'{"data": {"name": "raw/'])
def test_an_event_file_holding_no_event_is_dead_lettered_and_the_events_behind_it_delivered(
    tmp_path, bad
) -> None:
    """A torn event file made every listing raise; a JSON non-object made the retry bookkeeping
    raise (``event.get``). Either way nothing behind it (name = time order) was ever delivered
    or dead-lettered, the dispatcher logging ``dispatch.failed`` every 20 ms."""
    store = LocalDirStore(tmp_path)
    outbox = store.outbox()
    (outbox.directory / "00000000000000000001-bad.json").write_bytes(bad)  # first in order
    store.put("raw/good.fits", b"y")
    seen: list[str] = []
    dispatcher = OutboxDispatcher(outbox, _names(seen), NO_RETRY)
    assert dispatcher.drain_once() == 2
    assert seen == ["raw/good.fits"]
    assert (dispatcher.delivered, dispatcher.dead_lettered) == (1, 1)
    [letter] = (tmp_path / ".notifications-dlq").glob("*.json")
    assert json.loads(letter.read_text())["deadLetter"]["reason"].startswith(
        f"event file {letter.name}: not "
    )
    dispatcher.stop(drain=True, timeout=1)  # its listing raised on a torn file


def test_an_event_whose_dead_letter_fails_does_not_stop_the_pass(tmp_path, monkeypatch) -> None:
    """Its bookkeeping's error ended the whole pass, so the events behind it waited on it."""
    store = LocalDirStore(tmp_path)
    outbox = store.outbox()
    outbox.inject({"data": ["not", "an", "object"]})  # the handler fails on it
    store.put("raw/good.fits", b"y")
    seen: list[str] = []
    dispatcher = OutboxDispatcher(outbox, _names(seen), NO_RETRY)

    def full(*_args: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(outbox, "dead_letter", full)
    assert dispatcher.drain_once() == 1
    assert seen == ["raw/good.fits"] and dispatcher.delivered == 1
    monkeypatch.undo()  # the next pass dead-letters it
    assert dispatcher.drain_once() == 1 and dispatcher.dead_lettered == 1
    assert outbox.pending() == []
