"""Publish to Kafka (confluent-kafka / librdkafka) with the durability the pipeline relies on.

``acks=all`` and idempotence: confirmed only once every in-sync replica has it, never duplicated
or reordered by retries. ``publish`` waits for *its* delivery report, not a flush, so callers do
not wait for each other. Keyed by exposure (``instrument/exposure``): an exposure's arrivals
land in one partition, in order, for per-exposure stream processors.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from obsingest.bus.pubsub import PublishFailed
from obsingest.exhaustion import as_exhausted
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.bus.kafka")


class KafkaPublisher:
    """One producer per process; thread-safe. A producer that raised a fatal error (librdkafka:
    it can never send again) is replaced by a new one for the publishes after it."""

    def __init__(self, bootstrap: str, *, timeout: float = 5.0) -> None:
        from confluent_kafka import Producer

        self.timeout = timeout
        self._config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "delivery.timeout.ms": int(timeout * 1000),
            "request.timeout.ms": max(1000, int(timeout * 1000) - 100),
        }
        self._lock = threading.Lock()
        self.producer = Producer(self._config)

    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        """Produce and wait for this message's delivery report; returns ``topic/partition@offset``.
        Attributes travel as record headers."""
        from confluent_kafka import KafkaException, Producer

        producer = self.producer
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def on_delivery(err: Any, msg: Any) -> None:
            outcome["err"], outcome["msg"] = err, msg
            done.set()

        headers: list[tuple[str, str | bytes | None]] = [
            (k, str(v).encode()) for k, v in (attributes or {}).items()
        ]
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    producer.produce(topic, value=data, key=key, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: serve callbacks, then try again
                    if time.monotonic() > deadline:
                        raise
                    producer.poll(0.01)
            while not done.is_set():
                if time.monotonic() > deadline:
                    raise PublishFailed(f"kafka {topic}: no delivery report in {self.timeout} s")
                producer.poll(0.01)
            if outcome["err"] is not None:  # a broker's disk full is bus-full (retriable), as raised
                raise KafkaException(outcome["err"])
        except (KafkaException, BufferError) as exc:
            log_event(log, "kafka.publish_failed", logging.WARNING, topic=topic, error=str(exc))
            if fatal_error(exc.args[0] if exc.args else None):
                with self._lock:  # once, whichever publish met it first
                    if self.producer is producer:
                        self.producer = Producer(self._config)
            raise as_exhausted(exc, "bus", f"kafka topic {topic}") or PublishFailed(
                f"kafka {topic}: {exc}"
            ) from exc
        msg = outcome["msg"]
        return f"{msg.topic()}/{msg.partition()}@{msg.offset()}"

    def close(self) -> None:
        """Deliver what is queued (bounded by the timeout)."""
        self.producer.flush(self.timeout)


def fatal_error(error: Any) -> bool:
    """Whether ``error`` (a KafkaError) is librdkafka's fatal error, after which its producer can
    never send again: its delivery reports and ``produce`` say ``_FATAL`` (the ``fatal()`` flag
    is set only on the error the error callback gets)."""
    from confluent_kafka import KafkaError

    return isinstance(error, KafkaError) and (error.fatal() or error.code() == KafkaError._FATAL)
