"""The relay loop: pull -> push -> ack / nack with backoff / dead-letter (policy in ``policy``).
A dead-lettered message is acked, so one poisoned message never blocks the subscription.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from infra.local.relay.policy import (
    Action,
    PushResult,
    backoff_seconds,
    dead_letter_attributes,
    decide,
    push_envelope,
)
from infra.local.relay.settings import RelaySettings
from obsingest.bus.pull import Delivery, PullSource
from obsingest.logs import get_logger, log_event
from obsingest.metrics import Metrics, private_metrics

log = get_logger("obsingest.relay")


class PushTarget(Protocol):
    def push(self, envelope: dict[str, Any]) -> PushResult: ...


class DeadLetterSink(Protocol):
    def publish(self, data: bytes, attributes: dict[str, str]) -> str: ...


#: this unit's ``component`` label, and the names ``counts()`` reports its outcomes under
COMPONENT = "relay"
COUNTS = {"acked": "delivered", "nacked": "retried", "dead_lettered": "dead_lettered"}
#: seconds after its backoff a failed message still not back is forgotten (an emulator restart
#: dropped it, another consumer took it); should it come back,
#: Pub/Sub's ``delivery_attempt`` counts on
FORGET_AFTER = 600.0


class Relay:
    """Pull -> push -> settle, ``concurrency`` pushes at once. Thread-safe counters."""

    def __init__(
        self,
        source: PullSource,
        target: PushTarget,
        dead_letters: DeadLetterSink,
        settings: RelaySettings | None = None,
        subscription_path: str = "",
        metrics: Metrics | None = None,
    ) -> None:
        self.source = source
        self.metrics = metrics or private_metrics()
        self._pulled = self.metrics.counter(COMPONENT, "pulled")
        self.target = target
        self.dead_letters = dead_letters
        self.settings = settings or RelaySettings()
        self.subscription_path = subscription_path or self.settings.subscription
        self._lock = threading.Lock()
        #: failed pushes per message id (where Pub/Sub's ``delivery_attempt`` is not counted),
        #: and when to forget it (``FORGET_AFTER``)
        self._attempts: dict[str, tuple[int, float]] = {}
        self._next_sweep = 0.0
        self.clock = time.monotonic  # of the attempts' deadlines (a test sets its own)
        self._in_flight = 0
        self._last_activity = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._acks: AckBatcher | None = None

    def handle(self, delivery: Delivery) -> Action:
        """Push one message and settle it."""
        envelope = push_envelope(delivery, self.subscription_path)
        try:
            result = self.target.push(envelope)
        except Exception as exc:  # a target bug must not lose the message: nack it
            result = PushResult(None, error=f"{type(exc).__name__}: {exc}")
        now = self.clock()
        with self._lock:
            attempts = max(
                self._attempts.get(delivery.message_id, (0, 0.0))[0] + 1, delivery.delivery_attempt
            )
            delay = backoff_seconds(attempts, self.settings.min_backoff, self.settings.max_backoff)
            self._attempts[delivery.message_id] = (attempts, now + delay + FORGET_AFTER)
            if now >= self._next_sweep:
                self._sweep(now)
        action = decide(result, attempts, self.settings.max_attempts)
        fields = {
            "message_id": delivery.message_id,
            "object": delivery.attributes.get("objectId"),
            "attempts": attempts,
            "status": result.status,
        }
        if action is Action.ACK:
            self._forget(delivery.message_id)
            if self._acks is not None:
                self._acks.add(delivery.ack_id)
            else:
                self._settle(lambda: self.source.ack([delivery.ack_id]), fields)
            self._count("delivered")
            log_event(log, "relay.acked", logging.DEBUG, **fields)
        elif action is Action.NACK:
            self._settle(lambda: self.source.nack([delivery.ack_id], delay), fields)
            self._count("retried")
            log_event(log, "relay.nacked", logging.WARNING, delay_s=delay, error=result.describe(), **fields)
        else:
            attrs = dead_letter_attributes(delivery, result, attempts)
            try:
                self.dead_letters.publish(delivery.data, attrs)
            except Exception as exc:  # DLQ down: keep the message, try again later
                self._settle(lambda: self.source.nack([delivery.ack_id], delay), fields)
                self._count("retried")
                log_event(log, "relay.dead_letter_failed", logging.ERROR, error=str(exc), **fields)
                return Action.NACK
            self._forget(delivery.message_id)
            self._settle(lambda: self.source.ack([delivery.ack_id]), fields)
            self._count("dead_lettered", attrs["dlq_reason"])
            log_event(log, "relay.dead_lettered", logging.ERROR, reason=attrs["dlq_reason"], **fields)
        return action

    def _count(self, outcome: str, reason: str | None = None) -> None:
        self.metrics.ccd(COMPONENT, outcome, reason=reason)

    def counts(self) -> dict[str, int]:
        """Messages pulled, acked, nacked and dead-lettered (from the metrics)."""
        m = self.metrics
        return {"pulled": m.count(COMPONENT, "pulled")} | {
            name: m.count(COMPONENT, outcome) for name, outcome in COUNTS.items()
        }

    def _settle(self, call: Callable[[], None], fields: dict[str, Any]) -> None:
        """Ack or nack; a failure is only logged: the message comes back after its deadline."""
        try:
            call()
        except Exception as exc:
            log_event(log, "relay.settle_failed", logging.WARNING, error=str(exc), **fields)

    def _forget(self, message_id: str) -> None:
        with self._lock:
            self._attempts.pop(message_id, None)

    def _sweep(self, now: float) -> None:
        """Forget the failed messages long overdue (under the lock); next sweep in a while."""
        for message_id in [m for m, (_, until) in self._attempts.items() if until <= now]:
            del self._attempts[message_id]
        self._next_sweep = now + FORGET_AFTER / 10

    def run_once(self, timeout: float = 1.0) -> int:
        """Pull one batch and handle it concurrently; returns its size."""
        deliveries = self.source.pull(self.settings.max_messages, timeout)
        with self._lock:
            self._pulled.inc(len(deliveries))
        if not deliveries:
            return 0
        with ThreadPoolExecutor(self.settings.concurrency) as pool:
            list(pool.map(self.handle, deliveries))
        with self._lock:
            self._last_activity = time.monotonic()
        return len(deliveries)

    def _settle_async(self, delivery: Delivery) -> None:
        try:
            self.handle(delivery)
        except Exception as exc:  # never silent: the message is redelivered after its deadline
            log_event(
                log, "relay.handle_failed", logging.ERROR, message_id=delivery.message_id, error=str(exc)
            )
        finally:
            with self._lock:
                self._in_flight -= 1
                self._last_activity = time.monotonic()

    def start(self) -> Relay:
        """Relay in a background thread until ``stop``."""
        self._pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="relay-push")
        if self.settings.ack_linger > 0:
            self._acks = AckBatcher(self.source, self.settings.ack_linger).start()
        self._thread = threading.Thread(target=self._run, name="relay", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        assert self._pool is not None
        while not self._stop.is_set():
            with self._lock:
                free = self.settings.concurrency * 2 - self._in_flight
            if free <= 0:
                self._stop.wait(0.01)
                continue
            try:
                deliveries = self.source.pull(min(free, self.settings.max_messages), 2.0)
            except Exception as exc:  # emulator restart, network: keep relaying
                log_event(log, "relay.pull_failed", logging.WARNING, error=str(exc))
                self._stop.wait(0.5)
                continue
            if not deliveries:
                continue
            with self._lock:
                self._pulled.inc(len(deliveries))
                self._in_flight += len(deliveries)
                self._last_activity = time.monotonic()
            for delivery in deliveries:
                self._pool.submit(self._settle_async, delivery)

    @property
    def pending_retries(self) -> int:
        """Messages that failed at least once and are neither acked nor dead-lettered yet (nor
        long overdue: ``FORGET_AFTER``)."""
        with self._lock:
            self._sweep(self.clock())
            return len(self._attempts)

    def idle_for(self) -> float:
        """Seconds since the last pulled or settled message (0 while pushes are in flight)."""
        with self._lock:
            if self._in_flight or (self._acks is not None and self._acks.pending):
                return 0.0
            return time.monotonic() - self._last_activity

    def wait_idle(self, quiet: float, timeout: float) -> bool:
        """Block until nothing is in flight or awaiting retry and nothing came for ``quiet`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pending_retries == 0 and self.idle_for() >= quiet:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._acks is not None:
            self._acks.stop()  # acks what still waits


class AckBatcher:
    """The background relay's acks, sent together: what came within ``linger`` seconds of the
    first goes in one acknowledge call (at most ``max_batch``; Pub/Sub takes 2,500)."""

    def __init__(self, source: PullSource, linger: float, max_batch: int = 1000) -> None:
        self.source = source
        self.linger = linger
        self.max_batch = max_batch
        self._ids: list[str] = []
        self._sending = 0
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relay-acks", daemon=True)

    def start(self) -> AckBatcher:
        self._thread.start()
        return self

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._ids) + self._sending

    def add(self, ack_id: str) -> None:
        with self._cond:
            self._ids.append(ack_id)
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped.set()
            self._cond.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ids and not self._stopped.is_set():
                    self._cond.wait()
                if not self._ids:
                    return  # stopping, nothing left
                linger = not self._stopped.is_set()
            if linger:
                self._stopped.wait(self.linger)  # let the burst's other acks join
            with self._cond:
                batch, self._ids = self._ids[: self.max_batch], self._ids[self.max_batch :]
                self._sending = len(batch)
            try:
                self.source.ack(batch)
            except Exception as exc:
                log_event(log, "relay.settle_failed", logging.WARNING, error=str(exc), acks=len(batch))
            finally:
                with self._cond:
                    self._sending = 0
