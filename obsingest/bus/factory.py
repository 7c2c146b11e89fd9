"""Pick publishers from settings."""

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
    if len(publishers) == 1:
        return publishers[0]
    from obsingest.bus.fanout import FanoutPublisher

    return FanoutPublisher(publishers)
