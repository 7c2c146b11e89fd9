"""The ``Publisher`` contract (obsingest/bus/base.py): ``publish`` returns an id only once the bus
has accepted the message, and a subscriber then reads exactly the bytes, attributes and key.

Subclasses provide ``publisher``, ``topic`` (a fresh topic the publisher may publish to) and
``read_back`` (a callable ``(topic, count, timeout) -> list[Received]`` reading what arrived).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from obsingest.bus.base import Publisher


@dataclass(frozen=True)
class Received:
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    key: str | None = None


ReadBack = Callable[[str, int, float], list[Received]]


class PublisherContract:
    def test_publish_returns_an_id_and_the_message_arrives_intact(
        self, publisher: Publisher, topic: str, read_back: ReadBack
    ) -> None:
        body = b"\xc3\x01" + bytes(range(256)) * 8  # binary, like an Avro message
        message_id = publisher.publish(
            topic, body, key="LSSTComCam/2026112200001", attributes={"detector": "4"}
        )
        assert message_id
        [got] = read_back(topic, 1, 30.0)
        assert got.data == body
        assert got.attributes.get("detector") == "4"
        # Pub/Sub has no keys: the key travels as an attribute there
        assert (got.key or got.attributes.get("key")) == "LSSTComCam/2026112200001"

    def test_every_message_of_a_burst_arrives_once_with_distinct_ids(
        self, publisher: Publisher, topic: str, read_back: ReadBack
    ) -> None:
        ids = [publisher.publish(topic, f"m{i}".encode(), key=f"k{i % 3}") for i in range(20)]
        assert len(set(ids)) == 20
        got = read_back(topic, 20, 30.0)
        assert sorted(r.data for r in got) == sorted(f"m{i}".encode() for i in range(20))
