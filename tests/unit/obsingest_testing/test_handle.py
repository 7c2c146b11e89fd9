"""``FacilityHandle.arrivals`` on a scripted subscription: a message that is no ArrivalEvent is
named once, not redelivered into every later read."""

from __future__ import annotations

from typing import Any

import pytest

from infra.containers.facility import FacilityEndpoints
from obsingest.bus import pull
from obsingest.errors import BadMessage
from obsingest_testing.handle import FacilityHandle
from tests.unit.beam_jobs.helpers import arrival

pytestmark = pytest.mark.unit


class Subscription:
    """Pub/Sub's redelivery, roughly: what is not acknowledged is pulled again."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.unacked = {f"ack-{n}": body for n, body in enumerate(bodies)}

    def source(self, project: str, subscription: str) -> Any:
        return self

    def pull(self, max_messages: int, timeout: float) -> list[pull.Delivery]:
        return [pull.Delivery(ack_id, ack_id, body) for ack_id, body in self.unacked.items()]

    def ack(self, ack_ids: list[str]) -> None:
        for ack_id in ack_ids:
            self.unacked.pop(ack_id, None)

    def close(self) -> None:
        pass


def test_a_message_that_is_no_arrival_is_named_once_not_redelivered_into_every_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It raised before acknowledging its batch: redelivered, it failed every later read of the
    subscription, and the events pulled with it were never returned."""
    good = arrival(1, 0, 15, 1.0)
    sub = Subscription([b"not an arrival", good.encode()])
    monkeypatch.setattr(pull, "PubSubPullSource", sub.source)
    endpoints = FacilityEndpoints("p", "b", "127.0.0.1:1", "http://127.0.0.1:2", "sqlite://", "", "")
    handle = FacilityHandle(None, endpoints)  # type: ignore[arg-type]  # no container needed
    with pytest.raises(BadMessage):
        handle.arrivals("downstream", count=1, timeout=5)
    assert sub.unacked == {"ack-1": good.encode()}  # left to the next read
    assert [e.dataset_id for e in handle.arrivals("downstream", count=1, timeout=5)] == [good.dataset_id]
