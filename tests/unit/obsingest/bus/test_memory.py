"""The in-memory bus (the embedded default) under the Publisher contract."""

from __future__ import annotations

import pytest

from obsingest.bus.memory import InMemoryBus
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
