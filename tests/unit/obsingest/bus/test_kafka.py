"""KafkaPublisher with a fake librdkafka producer: what a fatal error leaves behind."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from obsingest.bus.kafka import KafkaPublisher
from obsingest.bus.pubsub import PublishFailed

pytestmark = pytest.mark.unit


class FakeProducer:
    """Delivers every message; the first one made has met a fatal error, after which librdkafka
    refuses every produce() with ``_FATAL`` (its queue purged): it can never send again."""

    made: ClassVar[list[FakeProducer]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.fatal = not FakeProducer.made
        self.reports: list[Any] = []
        FakeProducer.made.append(self)

    def produce(self, topic: str, value: bytes, key: Any, headers: Any, on_delivery: Any) -> None:
        from confluent_kafka import KafkaError, KafkaException

        if self.fatal:  # confluent_kafka's error from produce(): code _FATAL, fatal() not set
            raise KafkaException(KafkaError(KafkaError._FATAL, "Fatal error: idempotent producer"))
        self.reports.append((on_delivery, topic))

    def poll(self, timeout: float) -> int:
        for on_delivery, topic in self.reports:
            on_delivery(None, SimpleNamespace(topic=lambda t=topic: t, partition=lambda: 0, offset=lambda: 7))
        self.reports.clear()
        return 0

    def flush(self, timeout: float) -> int:
        return 0


def test_after_a_fatal_error_the_next_publish_goes_through_a_new_producer(monkeypatch):
    """A fatal error leaves librdkafka's producer unable to send for good: every later publish
    failed as a retriable PublishFailed, redelivered and failed again until someone restarted
    the process. The publish that met it still fails (retriable); the next one is sent."""
    monkeypatch.setattr("confluent_kafka.Producer", FakeProducer)
    monkeypatch.setattr(FakeProducer, "made", [])
    publisher = KafkaPublisher("127.0.0.1:1")
    with pytest.raises(PublishFailed, match="Fatal error"):
        publisher.publish("ccd-arrivals", b"one", key="LSSTCam/1")
    assert publisher.publish("ccd-arrivals", b"one", key="LSSTCam/1") == "ccd-arrivals/0@7"
    assert len(FakeProducer.made) == 2 and FakeProducer.made[1].config == FakeProducer.made[0].config
