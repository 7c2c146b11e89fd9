"""Pulling a Pub/Sub subscription: synchronous pull with ack / modify-ack-deadline
(``PubSubPullSource``, for the emulator push relay, which takes only as many messages as it has
push slots) and a background subscriber (``SubscriberThread``: the demo, tests, benchmarks).

The emulator's long poll sleeps a fixed 500 ms on an empty subscription, which would eat into a
CCD's 5 s budget at every hop, so with ``PUBSUB_EMULATOR_HOST`` set the source polls with
``return_immediately`` (backing off from 20 ms to 400 ms when idle). Pull and ack are direct
gRPC calls (``direct_rpc``); a deadline or cancel is an empty pull.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from obsingest.bus.direct_rpc import DirectRpcs
from obsingest.errors import PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.retry import RetryPolicy

log = get_logger("obsingest.bus.pull")


@dataclass(frozen=True)
class Delivery:
    """One pulled message."""

    ack_id: str
    message_id: str
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    publish_time: datetime | None = None
    #: Pub/Sub's own count when the subscription has a dead-letter policy, else 0
    delivery_attempt: int = 0


class PullSource(Protocol):
    """What the relay and the redrive take messages from (``PubSubPullSource``, or a test's)."""

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]: ...

    def ack(self, ack_ids: list[str]) -> None: ...

    def nack(self, ack_ids: list[str], delay_seconds: int) -> None:
        """Make the messages redeliverable after ``delay_seconds`` (modify ack deadline)."""


def subscription_path(project: str, subscription: str) -> str:
    if subscription.startswith("projects/"):
        return subscription
    return f"projects/{project}/subscriptions/{subscription}"


def _publish_time(message: Any) -> datetime | None:
    value = getattr(message, "publish_time", None)
    if value is None:
        return None
    if isinstance(value, datetime):  # proto-plus (the generated method's answer)
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if hasattr(value, "ToDatetime"):  # a raw protobuf Timestamp (the direct RPC's answer)
        return value.ToDatetime(tzinfo=UTC) if message.HasField("publish_time") else None
    return None


#: Poll period against the emulator (see the module docstring): right after a message, and
#: the most it backs off to (doubling per empty poll).
EMULATOR_POLL_SECONDS = 0.02
EMULATOR_POLL_MAX_SECONDS = 0.4


class PubSubPullSource:
    """Synchronous pull on one subscription."""

    def __init__(
        self,
        project: str,
        subscription: str,
        client: Any = None,
        poll_interval: float | None = None,
        max_poll_interval: float = EMULATOR_POLL_MAX_SECONDS,
    ) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        self.path = subscription_path(project, subscription)
        self.client = client or pubsub_v1.SubscriberClient()
        #: the RPCs themselves (module doc); an injected client is called through its methods
        self._direct = DirectRpcs(self.client.transport.grpc_channel) if client is None else None
        #: None: long-poll (Pub/Sub); seconds: poll with return_immediately (the emulator)
        self.poll_interval = poll_interval
        if poll_interval is None and os.environ.get("PUBSUB_EMULATOR_HOST"):
            self.poll_interval = EMULATOR_POLL_SECONDS
        self.max_poll_interval = max(max_poll_interval, self.poll_interval or 0)
        self._wait = self.poll_interval

    def pull(self, max_messages: int, timeout: float) -> list[Delivery]:
        """Up to ``max_messages``, as soon as there are any; [] after ``timeout`` seconds."""
        if self.poll_interval is None:
            response = self._pull(max_messages, timeout, return_immediately=False)
        else:
            deadline = time.monotonic() + timeout
            while True:
                response = self._pull(max_messages, timeout, return_immediately=True)
                if response is not None and response.received_messages:
                    self._wait = self.poll_interval
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                assert self._wait is not None
                time.sleep(min(self._wait, left))
                self._wait = min(self._wait * 2, self.max_poll_interval)
        if response is None:
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

    def _pull(self, max_messages: int, timeout: float, return_immediately: bool) -> Any:
        from google.api_core import exceptions as api_exceptions

        request: dict[str, Any] = {"subscription": self.path, "max_messages": max_messages}
        if return_immediately:
            request["return_immediately"] = True
        try:
            return self._call("pull", request, max(timeout, 0.1))
        except (
            api_exceptions.DeadlineExceeded,
            api_exceptions.Cancelled,  # the emulator resets a long-poll stream at its timeout
            api_exceptions.RetryError,
        ):
            return None

    def _call(self, method: str, request: dict[str, Any], timeout: float | None = None) -> Any:
        """``method`` (pull, acknowledge) as the transport's RPC, or through the generated
        method for an injected client and to retry a transient failure (module doc)."""

        def generated() -> Any:
            return getattr(self.client, method)(request=request, timeout=timeout)

        if self._direct is None:
            return generated()
        return self._direct.call(method, request, timeout, generated)

    def ack(self, ack_ids: list[str]) -> None:
        if ack_ids:
            self._call("acknowledge", {"subscription": self.path, "ack_ids": ack_ids}, 60.0)

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


#: deliveries of one message its callback failed on before ``SubscriberThread`` gives it up: its
#: subscription (``provision.subscribe``) has no dead-letter policy to stop the redeliveries
SUBSCRIBER_MAX_ATTEMPTS = 5
#: ``SubscriberThread``'s waits after failed pulls in a row: 0.5 s, doubling up to 5 s
SUBSCRIBER_BACKOFF = RetryPolicy(base_delay=0.5, max_delay=5.0, deadline=None, jitter=False)


class SubscriberThread:
    """Pull a subscription in a background thread, hand each message to ``callback``, ack it.
    A callback that raises leaves the message unacked, redelivered after the ack deadline, up to
    ``max_attempts`` deliveries; then it is acked and logged as dropped with the last error.
    Should the subscription be gone (an emulator restarted), it makes the topic and the
    subscription again and goes on."""

    def __init__(
        self,
        project: str,
        subscription: str,
        callback: Any,
        *,
        name: str = "subscriber",
        max_attempts: int = SUBSCRIBER_MAX_ATTEMPTS,
    ) -> None:
        self.source = PubSubPullSource(project, subscription)
        self.callback = callback
        self.max_attempts = max_attempts
        #: failed deliveries per message id, of messages not yet handled nor given up
        self._failures: dict[str, int] = {}
        #: the request that makes the subscription again (read by ``start``)
        self._again: dict[str, Any] = {}
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> SubscriberThread:
        found = self.source.client.get_subscription(request={"subscription": self.source.path})
        self._again = {
            "name": self.source.path,
            "topic": found.topic,
            "ack_deadline_seconds": found.ack_deadline_seconds,
        }
        self._thread.start()
        return self

    def _run(self) -> None:
        from google.api_core import exceptions as api_exceptions

        failures = 0
        while not self._stop.is_set():
            try:
                deliveries = self.source.pull(100, 2.0)
            except Exception as exc:  # an emulator restarting: keep going
                failures += 1
                log_event(log, "subscriber.pull_failed", logging.WARNING, error=str(exc), failures=failures)
                if isinstance(exc, api_exceptions.NotFound):
                    self._subscribe_again()
                self._stop.wait(SUBSCRIBER_BACKOFF.backoff_cap(failures))
                continue
            failures = 0
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
                    failures = self._failures.get(delivery.message_id, 0) + 1
                    gave_up = failures >= self.max_attempts
                    log_event(
                        log,
                        "subscriber.message_dropped" if gave_up else "subscriber.callback_failed",
                        logging.ERROR,
                        message_id=delivery.message_id,
                        attempts=failures,
                        error=str(exc),
                    )
                    if not gave_up:
                        self._failures[delivery.message_id] = failures
                        continue
                self._failures.pop(delivery.message_id, None)
                done.append(delivery.ack_id)
            if deliveries:
                self._last = time.monotonic()
            try:
                self.source.ack(done)
            except Exception as exc:  # they come back after the ack deadline: keep running
                log_event(log, "subscriber.ack_failed", logging.WARNING, error=str(exc))

    def _subscribe_again(self) -> None:
        """Make the topic and the subscription again: an emulator restarted forgot both."""
        from google.api_core import exceptions as api_exceptions
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        try:
            with pubsub_v1.PublisherClient() as publisher, contextlib.suppress(api_exceptions.AlreadyExists):
                publisher.create_topic(request={"name": self._again["topic"]})
            with contextlib.suppress(api_exceptions.AlreadyExists):
                self.source.client.create_subscription(request=self._again)
        except Exception as exc:  # tried again after the next failed pull
            log_event(log, "subscriber.subscribe_failed", logging.WARNING, error=str(exc))
            return
        again = {"subscription": self._again["name"], "topic": self._again["topic"]}
        log_event(log, "subscriber.subscribed_again", logging.WARNING, **again)

    def idle_for(self) -> float:
        """Seconds since the last message arrived."""
        return time.monotonic() - self._last

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.source.close()
