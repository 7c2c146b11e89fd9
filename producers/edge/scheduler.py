"""Which CCD goes next: the newest exposure first, one probe at a time while the destination is down.

Pure logic (the clock is injected). Items go by priority (the exposure id), then arrival. A
destination failure starts a capped exponential backoff; when it ends, one item is sent as a
probe, whose success ends the outage. Sends already in flight when the backoff began do not
lengthen it (16 simultaneous failures are one step). An item's own failure backs off that item
alone. Nothing is dropped here: items leave only through ``done``.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable

from obsingest.retry import RetryPolicy


class Scheduler:
    def __init__(
        self, backoff: RetryPolicy | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.backoff = backoff or RetryPolicy(base_delay=0.5, max_delay=10.0)
        self.clock = clock
        self._seq = itertools.count()
        self._ready: list[tuple[int, int, str]] = []  # (-priority, seq, key)
        self._delayed: list[tuple[float, int, int, str]] = []  # (due, -priority, seq, key)
        self._priority: dict[str, int] = {}
        self._item_failures: dict[str, int] = {}
        self._queued: set[str] = set()
        self.in_flight: set[str] = set()
        self.dest_failures = 0
        self.dest_not_before = 0.0
        self._probe: str | None = None

    def __len__(self) -> int:
        """Items known and not done (queued or in flight)."""
        return len(self._priority)

    @property
    def queued(self) -> int:
        return len(self._queued)

    @property
    def destination_down(self) -> bool:
        return self.dest_failures > 0

    def add(self, key: str, priority: int) -> bool:
        """Queue an item (due now). False if it is already known."""
        if key in self._priority:
            return False
        self._priority[key] = priority
        self._push_ready(key)
        return True

    def _push_ready(self, key: str) -> None:
        heapq.heappush(self._ready, (-self._priority[key], next(self._seq), key))
        self._queued.add(key)

    def pop_due(self) -> str | None:
        """The next item to send now, or None (nothing due, or the destination is backing off or
        already being probed). The item is in flight until ``done``/``retry``/``requeue``."""
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, neg, seq, key = heapq.heappop(self._delayed)
            heapq.heappush(self._ready, (neg, seq, key))
        if not self._ready:
            return None
        if self.dest_failures and (now < self.dest_not_before or self._probe is not None):
            return None
        _, _, key = heapq.heappop(self._ready)
        self._queued.discard(key)
        self.in_flight.add(key)
        if self.dest_failures:
            self._probe = key
        return key

    def wait_time(self) -> float | None:
        """Seconds until ``pop_due`` may return something (None: only new input can help)."""
        now = self.clock()
        candidates = []
        if self._ready:
            if self.dest_failures and self._probe is None:
                candidates.append(max(0.0, self.dest_not_before - now))
            elif not self.dest_failures:
                return 0.0
        if self._delayed:
            candidates.append(max(0.0, self._delayed[0][0] - now))
            if self.dest_failures:
                candidates.append(max(0.0, self.dest_not_before - now))
        return min(candidates) if candidates else None

    def done(self, key: str) -> None:
        """The item is finished (acked or quarantined); a success ends a destination outage."""
        self.finished(key)
        self.dest_failures = 0
        self.dest_not_before = 0.0

    def finished(self, key: str) -> None:
        """The item left without telling anything about the destination (quarantined)."""
        self.in_flight.discard(key)
        self._priority.pop(key, None)
        self._item_failures.pop(key, None)
        if self._probe == key:
            self._probe = None

    def retry(self, key: str, destination_fault: bool = True) -> float:
        """The item failed transiently; it goes back in the queue. Returns the wait imposed."""
        now = self.clock()
        self.in_flight.discard(key)
        was_probe = self._probe == key
        if was_probe:
            self._probe = None
        if destination_fault:
            if was_probe or not self.dest_failures or now >= self.dest_not_before:
                self.dest_failures += 1
                self.dest_not_before = now + self.backoff.backoff_cap(self.dest_failures)
            self._push_ready(key)
            return max(0.0, self.dest_not_before - now)
        failures = self._item_failures.get(key, 0) + 1
        self._item_failures[key] = failures
        delay = self.backoff.backoff_cap(failures)
        heapq.heappush(self._delayed, (now + delay, -self._priority[key], next(self._seq), key))
        self._queued.add(key)
        return delay

    def requeue(self, key: str) -> None:
        """Back in the queue at once (its worker died; a fresh one will try again)."""
        self.in_flight.discard(key)
        if self._probe == key:
            self._probe = None
        self._push_ready(key)

    def drop_queued(self) -> list[str]:
        """Forget everything queued (not in flight): the journal keeps it for the next start."""
        keys = list(self._queued)
        for key in keys:
            self._priority.pop(key, None)
        self._queued.clear()
        self._ready.clear()
        self._delayed.clear()
        return keys
