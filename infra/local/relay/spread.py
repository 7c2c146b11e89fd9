"""Push to several instances of the function: spread the deliveries over them and, when one does
not answer, deliver to the next one at once.

Why: with one instance, a SIGKILL inside an exposure's burst cost its CCDs the relay's backoff
(1, 2, 4 s) plus the instance's restart, ~10 s, twice Rubin's budget. With two or more, the
delivery that hit the dead instance goes to a live one within milliseconds (no backoff, the
same push attempt), and the dead one is passed over for ``cooldown`` seconds (doubling while it
stays dead, at most ``max_cooldown``) so later deliveries do not knock on it first. It is tried
again after its cooldown, by a real delivery; if every instance fails the push fails as before
and the relay's policy (nack with backoff, then dead-letter) takes over.

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
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from infra.local.relay.policy import PushResult

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
        #: instance index -> (passed over until, its current cooldown)
        self._down: dict[int, tuple[float, float]] = {}
        self.failovers = 0

    def order(self) -> list[int]:
        """This delivery's instances: round-robin from the next one, those cooling down last."""
        n = len(self.targets)
        first = next(self._next) % n
        ring = [(first + i) % n for i in range(n)]
        now = self.clock()
        with self._lock:
            cooling = {i for i, (until, _) in self._down.items() if until > now}
        return [i for i in ring if i not in cooling] + [i for i in ring if i in cooling]

    def push(self, envelope: dict[str, Any]) -> PushResult:
        result = PushResult(None, error="no instance tried")
        for tried, index in enumerate(self.order()):
            if tried:
                with self._lock:
                    self.failovers += 1
                if self.on_failover is not None:
                    self.on_failover(index, result)
            try:
                result = self.targets[index].push(envelope)
            except Exception as exc:  # a target bug counts as no answer from that instance
                result = PushResult(None, error=f"{type(exc).__name__}: {exc}")
            if not instance_failed(result):
                self._up(index)
                return result
            self._failed(index)
        return result

    def _up(self, index: int) -> None:
        with self._lock:
            self._down.pop(index, None)

    def _failed(self, index: int) -> None:
        with self._lock:
            _, last = self._down.get(index, (0.0, 0.0))
            cooldown = min(self.max_cooldown, last * 2) if last else self.cooldown
            self._down[index] = (self.clock() + cooldown, cooldown)
