"""Push to several instances of the function: spread the deliveries over them and, when one does
not answer, deliver to the next one at once.

Why: with one instance, a SIGKILL inside an exposure's burst cost its CCDs the relay's backoff
(1, 2, 4 s) plus the instance's restart, ~10 s, twice Rubin's budget. With two or more, the
delivery that hit the dead instance goes to a live one within milliseconds (no backoff, the
same push attempt), and the dead one is passed over for ``cooldown`` seconds (doubling while it
stays dead, at most ``max_cooldown``) so later deliveries do not knock on it first. It is tried
again after its cooldown, by a real delivery; if every instance fails the push fails as before
and the relay's policy (nack with backoff, then dead-letter) takes over.

A recovering instance is probed by one delivery at a time (a half-open circuit): the deliveries
in flight when it died all fail at once, and a restarted instance may not answer yet (or
slowly: its first deliveries warm what its start-up left cold), so letting every delivery whose
turn it is knock on it would hold many CCDs there at once; one probe costs one CCD at most,
the others go to the live instances until the probe is answered. Only a probe's failure
doubles the cooldown: the pushes that were in flight when the instance died fail together and
count as one failure (each doubling it would put a restarted instance out of work for the
longest cooldown).

Only answers that say "this instance could not take it" fail over: no response at all
(refused, reset, timeout: a dead or dying process) and 502/504 from a proxy in front of it. A
503 is the function's own "the registry is unavailable, retry later", which another instance
would answer too after its own retries, and a 4xx or 500 is about the message: those are the
relay's to decide, as they were.

Production does the same with Pub/Sub push to Cloud Functions with ``min_instance_count`` >= 2
(the frontend routes around a dead instance) and a small retry ``minimum_backoff``
(``infra/terraform``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from infra.local.relay.policy import PushResult
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.relay")

#: a push that took longer than this is logged with its instance (a cold or overloaded one)
SLOW_PUSH_SECONDS = 1.0

#: statuses that mean "this instance (or the proxy before it) could not take it"
FAILOVER_STATUSES = frozenset({502, 504})


class Target(Protocol):
    def push(self, envelope: dict[str, Any]) -> PushResult: ...


def instance_failed(result: PushResult) -> bool:
    """Whether another instance should be tried at once."""
    return result.status is None or result.status in FAILOVER_STATUSES


class SpreadPushTarget:
    """Round-robin over ``targets``; a delivery whose instance failed goes to the next at once."""

    def __init__(
        self,
        targets: Sequence[Target],
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
        """This delivery's instances: round-robin from the next one, those cooling down last
        (a recovering instance is this delivery's first when it is the one that probes it)."""
        return self._plan(claim=False)[0]

    def _plan(self, claim: bool = True) -> tuple[list[int], int | None]:
        """The order, and the recovering instance this delivery probes (``claim``: it takes
        the probe, which ``push`` hands back when it is answered)."""
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
                    log_event(
                        log,
                        "relay.slow_push",
                        logging.INFO,
                        instance=index,
                        seconds=round(took, 3),
                        probe=index == probe,
                        status=result.status,
                    )
                if not instance_failed(result):
                    self._up(index)
                    return result
                self._failed(index, started)
            return result
        finally:
            if probe is not None:
                with self._lock:
                    self._probing.discard(probe)

    def _up(self, index: int) -> None:
        with self._lock:
            self._down.pop(index, None)

    def _failed(self, index: int, started: float) -> None:
        """Mark ``index`` down, or keep it down longer; a push that started before it was
        marked down (in flight when it died) adds nothing."""
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
