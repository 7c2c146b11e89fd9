"""The subscribers of the chaos suite: ``ArrivalsObserver`` counts every ArrivalEvent delivered,
``IngestedObserver`` every ExposureIngested, before any deduplication, as downstream alert
processing would receive them (one pulling loop, ``TopicObserver``, each decoding its contract).

A message is identified by (message id, publish time): pstest numbers messages afresh after a
restart, and a redelivery of one message (an ack lost) is not a second announcement. Several
subscriptions may be pulled at once: after its topic was deleted or the emulator restarted, a
subscriber must subscribe again (a Pub/Sub subscription whose topic was deleted never receives
from a topic re-created under the same name), and ``resubscribe`` adds a fresh subscription
while the old one is drained of what it still holds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

log = logging.getLogger("obsingest.chaos.observer")

#: messages per pull; a full pull is followed by the next at once
PULL_MAX = 200
#: seconds between pulls otherwise. An observer's timing never enters a latency (each event
#: carries its own published time), and pulling again as soon as a pull had anything took the
#: CPU of a few messages per pull (its own and the emulator's) from the burst it measures
PULL_EVERY = 0.5


@dataclass(frozen=True)
class Announcement:
    dataset_id: str
    key: str  # instrument/exposure/detector
    message: tuple[str, str]  # (message id, publish time)
    registered: datetime
    published: datetime
    readout: datetime | None = None  # the CCD's readout time, the latency budget's start


@dataclass(frozen=True)
class Ingested:
    """One ExposureIngested as received."""

    key: str  # instrument/exposure
    message: tuple[str, str]  # (message id, publish time)
    event: Any  # the decoded ExposureIngested


class TopicObserver:
    """Pulls its subscriptions in a thread; ``_decode`` turns a message into what is kept."""

    def __init__(self, project: str, topic: str) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        self.project = project
        self.topic = topic
        self.client = pubsub_v1.SubscriberClient()
        self.subscriptions: list[str] = []
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], Any] = {}
        self.deliveries = 0
        self.undecodable = 0
        self.pull_errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{topic}-observer", daemon=True)
        self.resubscribe()

    def resubscribe(self) -> str:
        """Ensure the topic, and subscribe to it under a new name (the old ones keep draining)."""
        from google.api_core import exceptions as api_exceptions
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        from obsingest.bus.pubsub import topic_path
        from obsingest.bus.pull import subscription_path

        topic = topic_path(self.project, self.topic)
        publisher = pubsub_v1.PublisherClient()
        try:
            with contextlib.suppress(api_exceptions.AlreadyExists):
                publisher.create_topic(request={"name": topic})
        finally:
            publisher.stop()
        path = subscription_path(self.project, f"observer-{uuid.uuid4().hex[:8]}")
        self.client.create_subscription(request={"name": path, "topic": topic, "ack_deadline_seconds": 30})
        with self._lock:
            self.subscriptions.append(path)
        return path

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                paths = list(self.subscriptions)
            full = False
            for path in paths:
                full |= self._pull(path) >= PULL_MAX
            if not full:
                self._stop.wait(PULL_EVERY)

    def _decode(self, data: bytes, ident: tuple[str, str]) -> Any:
        raise NotImplementedError

    def _pull(self, path: str) -> int:
        try:
            response = self.client.pull(
                request={"subscription": path, "max_messages": PULL_MAX, "return_immediately": True},
                timeout=5,
            )
        except Exception as exc:  # emulator restarting, subscription gone: try again
            self.pull_errors += 1
            log.debug("pull %s failed: %s", path, exc)
            self._stop.wait(0.2)
            return 0
        ack_ids = []
        for received in response.received_messages:
            message = received.message
            published = message.publish_time
            ident = (str(message.message_id), published.isoformat() if published else "")
            try:
                kept = self._decode(bytes(message.data), ident)
            except Exception:
                with self._lock:
                    self.undecodable += 1
            else:
                with self._lock:
                    self.deliveries += 1
                    self._seen.setdefault(ident, kept)
            ack_ids.append(received.ack_id)
        if ack_ids:
            try:
                self.client.acknowledge(request={"subscription": path, "ack_ids": ack_ids})
            except Exception as exc:  # redelivered later: counted once by its identity
                log.debug("ack on %s failed: %s", path, exc)
        return len(ack_ids)

    def catch_up(self, rounds: int = 20) -> None:
        """Pull every subscription until a round finds nothing (at most ``rounds``): what the
        emulator has accepted is received before a fault that would forget it."""
        for _ in range(rounds):
            with self._lock:
                paths = list(self.subscriptions)
            if sum(self._pull(path) for path in paths) == 0:
                return

    # what was seen -----------------------------------------------------------------------------
    def received(self) -> list[Any]:
        """What each distinct message decoded to (a redelivery of one message counted once)."""
        with self._lock:
            return list(self._seen.values())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "messages": len(self._seen),
                "deliveries": self.deliveries,
                "undecodable": self.undecodable,
                "subscriptions": len(self.subscriptions),
                "pull_errors": self.pull_errors,
            }


class ArrivalsObserver(TopicObserver):
    """ArrivalEvents on ``ccd-arrivals``."""

    def _decode(self, data: bytes, ident: tuple[str, str]) -> Announcement:
        from obsingest.messages import ArrivalEvent

        event = ArrivalEvent.decode(data)
        return Announcement(
            dataset_id=str(event.dataset_id),
            key=f"{event.instrument}/{event.exposure}/{event.detector:03d}",
            message=ident,
            registered=event.registered_time,
            published=event.published_time,
            readout=event.readout_time,
        )

    def announcements(self) -> list[Announcement]:
        return self.received()

    def per_dataset(self) -> Counter[str]:
        return Counter(a.dataset_id for a in self.announcements())


class IngestedObserver(TopicObserver):
    """ExposureIngested events on ``exposures-ingested``."""

    def _decode(self, data: bytes, ident: tuple[str, str]) -> Ingested:
        from obsingest.messages import ExposureIngested

        event = ExposureIngested.decode(data)
        return Ingested(f"{event.instrument}/{event.exposure}", ident, event)

    def events(self) -> list[Ingested]:
        return self.received()

    def per_exposure(self) -> dict[str, set[str]]:
        """instrument/exposure -> the distinct events received for it, each as its record
        without ``published_time`` (JSON): a message sent again (at-least-once: a crash between
        publish and marking the outbox row published; the drain re-stamps the time sent) is the
        same event; two different events for one exposure would differ in what they say."""
        import json

        out: dict[str, set[str]] = {}
        for item in self.events():
            record = {k: v for k, v in item.event.to_record().items() if k != "published_time"}
            out.setdefault(item.key, set()).add(json.dumps(record, sort_keys=True, default=str))
        return out
