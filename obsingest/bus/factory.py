"""Pick publishers from settings; several at once publish through a ``FanoutPublisher``."""

from __future__ import annotations

from obsingest.bus.base import Publisher
from obsingest.settings import BusSettings


def open_publisher(settings: BusSettings) -> Publisher:
    backends = [b.strip() for b in settings.backend.split(",") if b.strip()]
    publishers: list[Publisher] = []
    for backend in backends:
        if backend == "memory":
            from obsingest.bus.memory import InMemoryBus

            publishers.append(InMemoryBus())
        elif backend == "pubsub":
            from obsingest.bus.pubsub import PubSubPublisher

            publishers.append(PubSubPublisher(settings.pubsub_project))
        elif backend == "kafka":
            from obsingest.bus.kafka import KafkaPublisher

            publishers.append(KafkaPublisher(settings.kafka_bootstrap_servers))
        else:
            raise ValueError(f"unknown bus backend {backend!r} (memory, pubsub, kafka)")
    if not publishers:
        raise ValueError("OBSINGEST_BUS_BACKEND names no backend")
    return publishers[0] if len(publishers) == 1 else FanoutPublisher(publishers)


class FanoutPublisher:
    """Publish to several buses (Pub/Sub for subscribers, Kafka for stream processors): succeeds
    only when every bus accepted the message; a failure on any makes the caller retry the whole
    publish, and subscribers deduplicate on the dataset id."""

    def __init__(self, publishers: list[Publisher]) -> None:
        self.publishers = publishers

    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        return ",".join(p.publish(topic, data, key=key, attributes=attributes) for p in self.publishers)

    def close(self) -> None:
        for publisher in self.publishers:
            publisher.close()
