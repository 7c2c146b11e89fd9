"""The relay's Pub/Sub edges: synchronous pull (with ack / modify-ack-deadline) and the DLQ.

Synchronous pull rather than streaming pull: the relay wants to take only as many messages as it
has push slots for, and the emulator's Python client caps a pull response at 4 MiB (finalize
notifications are ~1 KiB each, far below).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from obsingest.bus.pubsub import topic_path
from obsingest.errors import PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.relay.core import Delivery

log = get_logger("obsingest.relay.pubsub")


def subscription_path(project: str, subscription: str) -> str:
    if subscription.startswith("projects/"):
        return subscription
    return f"projects/{project}/subscriptions/{subscription}"


def _publish_time(message: Any) -> datetime | None:
    value = getattr(message, "publish_time", None)
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


class PubSubPullSource:
    """Synchronous pull on one subscription."""

    def __init__(self, project: str, subscription: str, client: Any = None) -> None:
        from google.cloud import pubsub_v1

        self.path = subscription_path(project, subscription)
        self.client = client or pubsub_v1.SubscriberClient()

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]:
        from google.api_core import exceptions as api_exceptions

        try:
            response = self.client.pull(
                request={"subscription": self.path, "max_messages": max_messages},
                timeout=max(timeout, 0.1),
            )
        except (
            api_exceptions.DeadlineExceeded,
            api_exceptions.Cancelled,  # the emulator resets a long-poll stream at its timeout
            api_exceptions.RetryError,
        ):
            return []
        return [
            Delivery(
                ack_id=received.ack_id,
                message_id=received.message.message_id,
                data=bytes(received.message.data),
                attributes=dict(received.message.attributes),
                publish_time=_publish_time(received.message),
                delivery_attempt=int(received.delivery_attempt or 0),
            )
            for received in response.received_messages
        ]

    def ack(self, ack_ids: list[str]) -> None:
        if ack_ids:
            self.client.acknowledge(request={"subscription": self.path, "ack_ids": ack_ids})

    def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
        if ack_ids:
            self.client.modify_ack_deadline(
                request={
                    "subscription": self.path,
                    "ack_ids": ack_ids,
                    "ack_deadline_seconds": int(delay_seconds),
                }
            )

    def close(self) -> None:
        self.client.close()


class PubSubDeadLetter:
    """Publishes given-up messages to the dead-letter topic, waiting for the message id."""

    def __init__(self, project: str, topic: str, client: Any = None, timeout: float = 10.0) -> None:
        from google.cloud import pubsub_v1

        self.path = topic_path(project, topic)
        self.client = client or pubsub_v1.PublisherClient()
        self.timeout = timeout

    def publish(self, data: bytes, attributes: dict[str, str]) -> str:
        message_id: str = self.client.publish(self.path, data, **attributes).result(
            timeout=self.timeout
        )
        log_event(log, "relay.dlq_published", logging.INFO, topic=self.path, id=message_id)
        return message_id


class SubscriberThread:
    """Pull a subscription in a background thread, hand each message to ``callback``, ack it.

    For subscribers that live inside another program (the demo, tests, benchmarks). A callback
    that raises leaves the message unacked, so it is redelivered after the ack deadline.
    """

    def __init__(
        self,
        project: str,
        subscription: str,
        callback: Any,
        *,
        max_messages: int = 100,
        name: str = "subscriber",
    ) -> None:
        import threading
        import time

        self.source = PubSubPullSource(project, subscription)
        self.callback = callback
        self.max_messages = max_messages
        self.received = 0
        self._clock = time.monotonic
        self._last = self._clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> SubscriberThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                deliveries = self.source.pull(self.max_messages, 2.0)
            except Exception as exc:  # emulator hiccup: keep going
                log_event(log, "subscriber.pull_failed", logging.WARNING, error=str(exc))
                self._stop.wait(0.5)
                continue
            done = []
            for delivery in deliveries:
                try:
                    self.callback(delivery)
                except PermanentError as exc:  # undecodable: redelivery cannot help
                    log_event(
                        log,
                        "subscriber.message_dropped",
                        logging.ERROR,
                        message_id=delivery.message_id,
                        reason=exc.reason,
                        error=str(exc),
                    )
                except Exception as exc:
                    log_event(
                        log,
                        "subscriber.callback_failed",
                        logging.ERROR,
                        message_id=delivery.message_id,
                        error=str(exc),
                    )
                    continue
                done.append(delivery.ack_id)
            if deliveries:
                self.received += len(deliveries)
                self._last = self._clock()
            try:
                self.source.ack(done)
            except Exception as exc:  # they come back after the ack deadline: keep running
                log_event(log, "subscriber.ack_failed", logging.WARNING, error=str(exc))

    def idle_for(self) -> float:
        """Seconds since the last message arrived."""
        return self._clock() - self._last

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.source.close()
