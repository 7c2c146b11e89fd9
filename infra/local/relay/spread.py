"""Push to several instances of the function, round-robin; when one does not answer, deliver
to the next at once instead of waiting out the relay's backoff and the instance's restart.

A dead instance is passed over for ``cooldown`` seconds (doubling while it stays dead, up to
``max_cooldown``), then probed by one delivery at a time (half-open circuit), so a restarting
instance never holds many CCDs; the pushes in flight when it died count as one failure. Only
no response or a proxy's 502/504 fail over: a 503 (registry down: another instance would say
the same), 4xx or 500 are the relay's to decide.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from infra.local.relay.loop import PushTarget
from infra.local.relay.policy import PushResult
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.relay")

#: a push that took longer than this is logged with its instance (a cold or overloaded one)
SLOW_PUSH_SECONDS = 1.0

#: statuses that mean "this instance (or the proxy before it) could not take it"
FAILOVER_STATUSES = frozenset({502, 504})


def instance_failed(result: PushResult) -> bool:
    """Whether another instance should be tried at once."""
    return result.status is None or result.status in FAILOVER_STATUSES


class SpreadPushTarget:
    def __init__(
        self,
        targets: Sequence[PushTarget],
        *,
        cooldown: float = 0.5,
        max_cooldown: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        on_failover: Callable[[int, PushResult], None] | None = None,
    ) -> None:
        if not targets:
            raise ValueError("SpreadPushTarget needs at least one target")
        self.targets = list(targets)
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.clock = clock
        self.on_failover = on_failover
        self._next = itertools.count()
        self._lock = threading.Lock()
        #: instance index -> (passed over until, its current cooldown, when it was marked down)
        self._down: dict[int, tuple[float, float, float]] = {}
        #: recovering instances with a probe delivery in flight
        self._probing: set[int] = set()
        self.failovers = 0

    def order(self) -> list[int]:
        """A delivery's instances: round-robin, cooling-down ones last (a probed one first)."""
        return self._plan(claim=False)[0]

    def _plan(self, claim: bool = True) -> tuple[list[int], int | None]:
        """The order, and the recovering instance this delivery probes (``claim``: take it)."""
        n = len(self.targets)
        first = next(self._next) % n
        ring = [(first + i) % n for i in range(n)]
        now = self.clock()
        probe = None
        with self._lock:
            for i in ring:
                state = self._down.get(i)
                if state is not None and state[0] <= now and i not in self._probing:
                    probe = i
                    if claim:
                        self._probing.add(i)
                    break
            down = set(self._down)
        live = [i for i in ring if i not in down]
        rest = [i for i in ring if i in down and i != probe]
        return ([probe] if probe is not None else []) + live + rest, probe

    def push(self, envelope: dict[str, Any]) -> PushResult:
        result = PushResult(None, error="no instance tried")
        order, probe = self._plan()
        try:
            for tried, index in enumerate(order):
                if tried:
                    with self._lock:
                        self.failovers += 1
                    if self.on_failover is not None:
                        self.on_failover(index, result)
                started = self.clock()
                try:
                    result = self.targets[index].push(envelope)
                except Exception as exc:  # a target bug counts as no answer from that instance
                    result = PushResult(None, error=f"{type(exc).__name__}: {exc}")
                took = self.clock() - started
                if took > SLOW_PUSH_SECONDS:
                    slow = {"instance": index, "seconds": round(took, 3), "probe": index == probe}
                    log_event(log, "relay.slow_push", logging.INFO, status=result.status, **slow)
                if not instance_failed(result):
                    with self._lock:
                        self._down.pop(index, None)
                    return result
                self._failed(index, started)
            return result
        finally:
            if probe is not None:
                with self._lock:
                    self._probing.discard(probe)

    def _failed(self, index: int, started: float) -> None:
        """Mark ``index`` down, or longer; a push started before it was marked down adds nothing."""
        with self._lock:
            state = self._down.get(index)
            if state is None:
                cooldown = min(self.max_cooldown, self.cooldown)
            elif started < state[2]:
                return
            else:
                cooldown = min(self.max_cooldown, state[1] * 2)
            now = self.clock()
            self._down[index] = (now + cooldown, cooldown, now)
