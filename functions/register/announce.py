"""Announcing through the registry's outbox: ``publish_new`` right after the commit, ``drain``
what is pending, ``publish_message`` an ExposureIngested. ``STAMPED`` contracts get
``published_time`` when actually sent, so a late announcement reports its real latency. A failed
publish leaves the row pending; a drain stops at its first failure.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from obsingest import avro
from obsingest.bus.base import Publisher
from obsingest.errors import BadMessage, ObsIngestError
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureIngested, utcnow
from obsingest.registry import OutboxMessage, Registry
from obsingest.registry.group_commit import applying
from obsingest.registry.outbox import OutboxRow

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

log = get_logger("obsingest.register.announce")

#: Seconds before a drain may retry a failed row. 0: paced by the drains' own cadence.
RETRY_AFTER_SECONDS = 0.0

#: Contracts re-stamped when sent: name -> typed view; any other body is published as written.
STAMPED: dict[str, type[ArrivalEvent] | type[ExposureIngested]] = {
    ArrivalEvent.SCHEMA: ArrivalEvent,
    ExposureIngested.SCHEMA: ExposureIngested,
}


def arrival_message(arrival: ArrivalEvent, topic: str) -> OutboxMessage:
    """The outbox row of ``arrival``; subscribers filter on its attributes without decoding."""
    attributes = {
        "instrument": arrival.instrument,
        "exposure": str(arrival.exposure),
        "detector": str(arrival.detector),
        "dataset_id": str(arrival.dataset_id),
        "schema": "ArrivalEvent",
    }
    return OutboxMessage(topic, arrival.encode(), f"{arrival.instrument}/{arrival.exposure}", attributes)


@dataclass
class DrainResult:
    published: int = 0
    failed: int = 0


@dataclass
class ArrivalAnnouncer:
    """Publishes outbox rows of one registry on one publisher. Thread-safe."""

    registry: Registry
    publisher: Publisher
    #: every dataset's first announcement (now or by a drain) is timed here; None: not recorded
    metrics: Metrics | None = None
    #: monotonic time of the last failed publish (drains wait a while after it)
    failed_at: float = float("-inf")
    _drain_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _marks: Callable[[list[int]], None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # concurrent publishers' rows marked in one UPDATE: one each queued on the pool and write lock
        self._marks = applying(lambda row_ids: self.registry.outbox.mark_published(row_ids))

    def send(self, message: OutboxMessage, arrival: ArrivalEvent) -> ArrivalEvent:
        """Publish ``message``'s ``arrival`` stamped now, bypassing the outbox; raises what the bus raises."""
        sent = dataclasses.replace(arrival, published_time=utcnow())
        self.publisher.publish(message.topic, sent.encode(), key=message.key, attributes=message.attributes)
        return sent

    def publish_new(
        self, row_id: int | None, message: OutboxMessage, arrival: ArrivalEvent, mark: bool = True
    ) -> ArrivalEvent | None:
        """Publish a just-registered dataset's event; None when it stays in the outbox.
        ``mark=False``: the caller marks the row (``ExposureCloser.close_quietly``)."""
        try:
            sent = self.send(message, arrival)
        except Exception as exc:  # any publisher failure: the row stays, with the reason
            self._failed(row_id, exc, "arrival.publish_deferred", dataset_id=str(arrival.dataset_id))
            return None
        if mark:
            self.mark([row_id] if row_id is not None else [])
        if self.metrics is not None:
            self.metrics.readout_latency("announced", sent.latency, sent.transport, sent.instrument)
        return sent

    def publish_message(
        self, row_id: int | None, message: OutboxMessage, view: ExposureIngested | None = None
    ) -> Any:
        """Publish a row that is no ArrivalEvent: ``view`` stamped now, else the body as written.
        What was sent; None when it stays in the outbox."""
        sent = dataclasses.replace(view, published_time=utcnow()) if view is not None else None
        payload = sent.encode() if sent is not None else message.payload
        try:
            self.publisher.publish(message.topic, payload, key=message.key, attributes=message.attributes)
        except Exception as exc:  # any publisher failure: the row stays, with the reason
            self._failed(row_id, exc, "outbox.publish_deferred", topic=message.topic, key=message.key)
            return None
        self.mark([row_id] if row_id is not None else [])
        return sent if sent is not None else payload

    def publish_row(self, row: OutboxRow) -> Any:
        """Publish one claimed row by its contract; what was sent, None when publishing failed."""
        payload = row.message.payload
        try:
            contract = STAMPED.get(avro.writer_schema(payload).name)
            view = contract.decode(payload) if contract is not None else None
        except BadMessage:  # not one of ours: published as written
            view = None
        if isinstance(view, ArrivalEvent):
            return self.publish_new(row.id, row.message, view)
        return self.publish_message(row.id, row.message, view)

    def _failed(self, row_id: int | None, exc: Exception, event: str, **about: Any) -> None:
        reason = getattr(exc, "reason", "publish-failed")
        self.failed_at = time.monotonic()
        log_event(log, event, logging.WARNING, reason=reason, error=str(exc), **about)
        if row_id is None:
            return
        try:
            self.registry.outbox.mark_failed(row_id, f"{reason}: {exc}", RETRY_AFTER_SECONDS)
        except ObsIngestError as mark_exc:  # the lease expires by itself: a drain retries
            log_event(log, "outbox.mark_failed_failed", logging.WARNING, error=str(mark_exc))

    def mark(self, row_ids: list[int]) -> None:
        """Mark rows published; a failure is logged (a drain publishes them again, deduplicated)."""
        if not row_ids:
            return
        try:
            self._marks(row_ids)
        except ObsIngestError as exc:
            log_event(log, "outbox.mark_failed", logging.WARNING, rows=row_ids, error=str(exc))

    def drain(self, limit: int = 100) -> DrainResult:
        """Publish up to ``limit`` pending rows, stopping at the first failure; a concurrent
        call returns at once with nothing done."""
        result = DrainResult()
        if not self._drain_lock.acquire(blocking=False):
            return result
        try:
            rows = self.registry.outbox.claim(limit=limit)
            for index, row in enumerate(rows):
                if self.publish_row(row) is None:
                    result.failed += 1
                    # the bus is down: give the rest of the batch back for the next drain
                    rest = [r.id for r in rows[index + 1 :]]
                    self.registry.outbox.release(rest, RETRY_AFTER_SECONDS)
                    break
                result.published += 1
        finally:
            self._drain_lock.release()
        if result.published or result.failed:
            log_event(
                log, "outbox.drained", logging.WARNING if result.failed else logging.INFO, **asdict(result)
            )
        return result


@dataclass
class PeriodicDrain:
    """Drain at most once per ``every`` seconds, from a caller that runs often (each request)."""

    announcer: ArrivalAnnouncer
    every: float = 5.0
    limit: int = 50
    _next: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def maybe_drain(self) -> DrainResult | None:
        now = time.monotonic()
        with self._lock:
            if now < self._next or now - self.announcer.failed_at < self.every:
                return None
            self._next = now + self.every
        try:
            return self.announcer.drain(self.limit)
        except ObsIngestError as exc:  # the registry is down: the next invocation tries again
            log_event(log, "outbox.drain_failed", logging.WARNING, error=str(exc))
            return None
