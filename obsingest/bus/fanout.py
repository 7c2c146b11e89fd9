"""Publish to several buses (Pub/Sub for subscribers, Kafka for stream processors).

Succeeds only when every bus accepted the message; a failure on any makes the caller retry the
whole publish, and subscribers deduplicate on the dataset id.
"""

from __future__ import annotations

from obsingest.bus.base import Publisher


class FanoutPublisher:
    def __init__(self, publishers: list[Publisher]) -> None:
        self.publishers = publishers

    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        ids = [p.publish(topic, data, key=key, attributes=attributes) for p in self.publishers]
        return ",".join(ids)

    def close(self) -> None:
        for publisher in self.publishers:
            publisher.close()
