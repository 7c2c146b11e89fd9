"""In-process bus: the embedded default. Messages are handed to subscribers synchronously, which
is what the demo needs to run on one machine without any service, and each topic keeps its
latest ``KEPT_PER_TOPIC`` for inspection (not all: a night is ~190,000 arrivals)."""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Message:
    topic: str
    data: bytes
    key: str | None
    attributes: dict[str, str] = field(default_factory=dict)
    message_id: str = ""


Subscriber = Callable[[Message], None]

#: messages a topic keeps for inspection (tests, the demo), the latest ones
KEPT_PER_TOPIC = 10_000


class InMemoryBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.topics: dict[str, deque[Message]] = defaultdict(lambda: deque(maxlen=KEPT_PER_TOPIC))
        self._subscribers: dict[str, list[Subscriber]] = defaultdict(list)

    def subscribe(self, topic: str, callback: Subscriber) -> None:
        with self._lock:
            self._subscribers[topic].append(callback)

    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        with self._lock:
            message = Message(topic, data, key, dict(attributes or {}), str(next(self._ids)))
            self.topics[topic].append(message)
            subscribers = list(self._subscribers[topic])
        for callback in subscribers:
            callback(message)
        return message.message_id

    def close(self) -> None:
        """Nothing to release; present for the Publisher protocol."""
