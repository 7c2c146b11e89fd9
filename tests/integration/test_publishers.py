"""The Pub/Sub and Kafka publishers on the real local services under the Publisher contract."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import cast

import pytest

from obsingest.bus.kafka import KafkaPublisher
from obsingest.bus.pubsub import PubSubPublisher
from tests.contracts.publisher import PublisherContract, Received
from tests.integration.fixtures.handles import KafkaService, PubSubService

pytestmark = pytest.mark.integration


class TestPubSubPublisherContract(PublisherContract):
    @pytest.fixture
    def publisher(self, pubsub: PubSubService) -> Iterator[PubSubPublisher]:
        publisher = PubSubPublisher(pubsub.project_id)
        yield publisher
        publisher.close()

    @pytest.fixture
    def subscription(self, pubsub: PubSubService, topic: str) -> str:
        return pubsub.new_subscription(topic)  # before publishing: it sees only what follows

    @pytest.fixture
    def topic(self, pubsub: PubSubService) -> str:
        return pubsub.new_topic("contract")

    @pytest.fixture
    def read_back(self, pubsub: PubSubService, subscription: str):
        def read(_topic: str, count: int, timeout: float) -> list[Received]:
            client = pubsub.subscriber()
            got: dict[str, Received] = {}
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                response = client.pull(
                    request={"subscription": subscription, "max_messages": 100}, timeout=10
                )
                for m in response.received_messages:
                    got[m.message.message_id] = Received(bytes(m.message.data), dict(m.message.attributes))
                if response.received_messages:
                    client.acknowledge(
                        request={
                            "subscription": subscription,
                            "ack_ids": [m.ack_id for m in response.received_messages],
                        }
                    )
            return list(got.values())

        return read


class TestKafkaPublisherContract(PublisherContract):
    @pytest.fixture
    def publisher(self, kafka: KafkaService) -> Iterator[KafkaPublisher]:
        publisher = KafkaPublisher(kafka.bootstrap_servers)
        yield publisher
        publisher.close()

    @pytest.fixture
    def topic(self, kafka: KafkaService) -> str:
        return kafka.new_topic("contract", partitions=3)

    @pytest.fixture
    def read_back(self, kafka: KafkaService):
        from confluent_kafka import Consumer

        def read(topic: str, count: int, timeout: float) -> list[Received]:
            consumer = Consumer(kafka.consumer_config())
            consumer.subscribe([topic])
            got: list[Received] = []
            deadline = time.monotonic() + timeout
            try:
                while len(got) < count and time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is None or msg.error() is not None:
                        continue
                    headers = {k: v.decode() for k, v in cast(list[tuple[str, bytes]], msg.headers() or [])}
                    raw_key, value = msg.key(), msg.value()
                    key = raw_key.decode() if raw_key is not None else None
                    assert value is not None
                    got.append(Received(value, headers, key))
            finally:
                consumer.close()
            return got

        return read


def test_kafka_publisher_uses_the_configured_broker_not_a_hardcoded_one(
    kafka: KafkaService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OBSINGEST_BUS_BACKEND=kafka on the local stack: arrivals go where KAFKA_BOOTSTRAP_SERVERS
    points (the factory used to open 127.0.0.1:9092, where nothing listens)."""
    from obsingest.bus.factory import open_publisher
    from obsingest.settings import BusSettings

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka.bootstrap_servers)
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "kafka")
    monkeypatch.delenv("OBSINGEST_BUS_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    topic = kafka.new_topic("factory")
    publisher = open_publisher(BusSettings())
    try:
        assert publisher.publish(topic, b"arrival", key="k").startswith(f"{topic}/")
    finally:
        publisher.close()
