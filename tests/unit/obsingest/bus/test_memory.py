"""The in-memory bus (the embedded default) under the Publisher contract."""

from __future__ import annotations

import pytest

from obsingest.bus.memory import KEPT_PER_TOPIC, InMemoryBus
from tests.contracts.publisher import PublisherContract, Received

pytestmark = pytest.mark.unit


class TestInMemoryBusContract(PublisherContract):
    @pytest.fixture
    def publisher(self) -> InMemoryBus:
        return InMemoryBus()

    @pytest.fixture
    def topic(self) -> str:
        return "ccd-arrivals"

    @pytest.fixture
    def read_back(self, publisher: InMemoryBus):
        def read(topic: str, count: int, timeout: float) -> list[Received]:
            messages = publisher.topics[topic]
            assert len(messages) == count
            return [Received(m.data, m.attributes, m.key) for m in messages]

        return read


def test_subscribers_are_called_synchronously_with_each_message() -> None:
    bus = InMemoryBus()
    seen: list[bytes] = []
    bus.subscribe("t", lambda m: seen.append(m.data))
    bus.publish("t", b"one")
    assert seen == [b"one"]
    bus.publish("other", b"two")
    assert seen == [b"one"]


def test_each_topic_keeps_only_its_latest_messages() -> None:
    """The embedded default runs for nights: ~190,000 arrivals a night kept for good would grow
    without bound. Subscribers still get every message; the topic keeps the latest KEPT_PER_TOPIC."""
    bus = InMemoryBus()
    seen: list[bytes] = []
    bus.subscribe("t", lambda m: seen.append(m.data))
    for i in range(KEPT_PER_TOPIC + 5):
        bus.publish("t", str(i).encode())
    assert len(seen) == KEPT_PER_TOPIC + 5
    kept = bus.topics["t"]
    assert len(kept) == KEPT_PER_TOPIC
    assert kept[0].data == b"5" and kept[-1].data == str(KEPT_PER_TOPIC + 4).encode()
