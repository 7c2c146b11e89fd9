"""``obsingest arrivals tail`` against a scripted subscription: the bus going away (the emulator
restarted: the subscription is gone) does not end the tail; what it printed is acknowledged."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as api_exceptions

from obsingest.bus import pull
from obsingest_cli.script import arrivals
from tests.unit.beam_jobs.helpers import arrival

pytestmark = pytest.mark.unit


class Subscription:
    """Each ``pull`` answers the next step: a list of ArrivalEvents, or an exception raised."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps
        self.subscribed = 0
        self.acked: list[str] = []
        self.pending: set[str] = set()

    def subscribe(self, project: str, topic: str, name: str) -> str:
        self.subscribed += 1
        return f"projects/{project}/subscriptions/{name}"

    def source(self, project: str, path: str) -> Any:
        return _Source(self)


class _Source:
    def __init__(self, sub: Subscription) -> None:
        self.sub = sub

    def pull(self, max_messages: int, timeout: float) -> list[pull.Delivery]:
        step = self.sub.steps.pop(0) if self.sub.steps else []
        if isinstance(step, Exception):
            raise step
        out = [pull.Delivery(f"ack-{e.detector}", str(e.detector), e.encode()) for e in step]
        self.sub.pending.update(d.ack_id for d in out)
        return out

    def ack(self, ack_ids: list[str]) -> None:
        self.sub.acked += ack_ids
        self.sub.pending.difference_update(ack_ids)

    def close(self) -> None:
        pass


@pytest.fixture
def subscription(monkeypatch: pytest.MonkeyPatch) -> Subscription:
    import infra.local.provision

    sub = Subscription([])
    monkeypatch.setattr(infra.local.provision, "subscribe", sub.subscribe)
    monkeypatch.setattr(pull, "PubSubPullSource", sub.source)
    monkeypatch.setattr(arrivals, "RESUBSCRIBE_SECONDS", 0.0)
    return sub


def test_the_subscription_gone_with_the_emulator_is_made_again_and_the_tail_goes_on(
    subscription: Subscription, capsys: pytest.CaptureFixture[str]
) -> None:
    """It ended the tail with a NotFound traceback: an operator's follow of the night stopped at
    the first Pub/Sub restart."""
    gone = api_exceptions.NotFound("Subscription does not exist")
    subscription.steps += [[arrival(1, 0, 15, 1.0)], gone, gone, [arrival(1, 1, 15, 1.0)]]
    assert arrivals.run_tail("p", "tail", False, limit=2) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == [
        f"LSSTComCam/2025010100001/{d:03d}" for d in (0, 1)
    ]
    assert "Subscription does not exist" in err
    assert subscription.subscribed == 3


def test_what_was_printed_before_the_limit_is_acknowledged_and_only_that(
    subscription: Subscription, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--limit`` stopped mid-batch without acknowledging anything: the next tail on the same
    (durable, default-named) subscription printed those CCDs again as new."""
    subscription.steps.append([arrival(1, d, 15, 1.0) for d in range(3)])
    assert arrivals.run_tail("p", "tail", True, limit=1) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert subscription.acked == ["ack-0"]
    assert subscription.pending == {"ack-1", "ack-2"}  # not shown: the next tail gets them
