"""Deliver the local store's finalize notifications to a handler, as Eventarc/Pub/Sub would.

At-least-once: an event is deleted only after the handler returned. A failing one is redelivered
as ``policy`` says (``retry.OUTBOX_REDELIVERY``), then moved to the dead-letter directory with
the reason; the rest carry on. An event file that holds no event (not a JSON object) is
dead-lettered by the outbox's listing, never tried.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from obsingest.logs import get_logger, log_event
from obsingest.retry import OUTBOX_REDELIVERY, RetryPolicy
from obsingest.store.local import LocalOutbox

log = get_logger("obsingest.dispatch")


@dataclass
class OutboxDispatcher:
    outbox: LocalOutbox
    handler: Callable[[dict[str, Any]], None]
    policy: RetryPolicy = OUTBOX_REDELIVERY
    poll_interval: float = 0.02
    delivered: int = 0
    dead_lettered: int = 0
    #: event -> (failed attempts, when it may be tried again)
    _retry: dict[Path, tuple[int, float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def drain_once(self) -> int:
        """Try every due event once; returns how many were handled (acked or dead-lettered,
        an unreadable event file included). One event's failing bookkeeping (ack, dead letter)
        is logged and tried again next pass, never stops the others."""
        before = self.dead_lettered
        pending = self.outbox.pending(self._refuse)
        handled = self.dead_lettered - before
        now = time.monotonic()
        for path, event in pending:
            attempts, not_before = self._retry.get(path, (0, 0.0))
            if not_before > now:
                continue
            try:
                handled += self._deliver(path, event, attempts, now)
            except Exception as exc:  # its ack or dead letter failed: tried again next pass
                log_event(log, "dispatch.failed", logging.ERROR, event_file=path.name, error=str(exc))
        return handled

    def _refuse(self, letter: Path, reason: str) -> None:
        """An event file that holds no event, dead-lettered by the listing."""
        self.dead_lettered += 1
        log_event(
            log, "dispatch.dead_lettered", logging.ERROR, event_file=letter.name, attempts=0, error=reason
        )

    def _deliver(self, path: Path, event: dict[str, Any], attempts: int, now: float) -> int:
        try:
            self.handler(event)
        except Exception as exc:  # any failure is retried; the handler classifies its own
            attempts += 1
            data = event.get("data")
            name = data.get("name") if isinstance(data, dict) else None
            fields = {"object": name, "attempts": attempts, "error": str(exc)}
            if attempts < self.policy.max_attempts:
                self._retry[path] = (attempts, now + self.policy.backoff(attempts))
                log_event(log, "dispatch.retry", logging.WARNING, **fields)
                return 0
            self.outbox.dead_letter(path, f"{type(exc).__name__}: {exc}", attempts)
            self.dead_lettered += 1
            log_event(log, "dispatch.dead_lettered", logging.ERROR, **fields)
        else:
            self.outbox.ack(path)
            self.delivered += 1
        self._retry.pop(path, None)
        return 1

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="outbox-dispatcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                handled = self.drain_once()
            except Exception as exc:  # one unreadable event must not stop every delivery
                log_event(log, "dispatch.failed", logging.ERROR, error=str(exc))
                handled = 0
            if not handled:
                self._stop.wait(self.poll_interval)

    def stop(self, drain: bool = True, timeout: float = 60.0) -> None:
        """Stop the thread; with ``drain``, first wait until the outbox is empty (or timeout)."""
        deadline = time.monotonic() + timeout
        while drain and self.outbox.pending(self._refuse) and time.monotonic() < deadline:
            time.sleep(self.poll_interval)
        self._stop.set()
        if self._thread:
            self._thread.join()
