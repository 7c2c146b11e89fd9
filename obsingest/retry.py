"""Retry with exponential backoff and full jitter, bounded by attempts *and* a deadline.

Why a helper of our own rather than each client library's retry: the pipeline promises 5 s from
readout to announcement, so every retry loop must stop at a deadline the caller chooses, retry
only what a retry can fix (the caller's ``classify`` says which), and cap some kinds of errors
more tightly than others (a 403 from a transient auth hiccup gets two more tries, not six).

The helper is pure: the clock, the sleep and the random source are injectable, so its decisions
are unit-tested without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from obsingest import defaults
from obsingest.errors import RetriableError

T = TypeVar("T")


@dataclass(frozen=True)
class Transient:
    """``classify``'s verdict for an error worth retrying.

    ``kind`` names the failure in logs and in the final error; ``max_retries`` caps retries of
    this kind below the policy's own limit (None: only the policy's limits apply).
    """

    kind: str
    max_retries: int | None = None


Classifier = Callable[[BaseException], "Transient | None"]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts, backoff curve and an overall deadline (seconds)."""

    max_attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 1.0
    multiplier: float = 2.0
    deadline: float = defaults.BUDGET_SECONDS

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.deadline <= 0:
            raise ValueError("delays must be >= 0 and the deadline > 0")

    def backoff_cap(self, retry: int) -> float:
        """Upper bound of the wait before retry number ``retry`` (1-based)."""
        return min(self.max_delay, self.base_delay * self.multiplier ** (retry - 1))

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Full jitter: uniform in [0, cap), so many clients retrying at once spread out."""
        return rand() * self.backoff_cap(retry)


class RetriesExhausted(RetriableError):
    """Every allowed attempt failed transiently; the operation may succeed later."""

    reason = "retries-exhausted"

    def __init__(self, message: str, kind: str, attempts: int, last: BaseException) -> None:
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.last = last


@dataclass
class Attempt:
    """What ``on_retry`` is told before each wait."""

    number: int  # the attempt that just failed, 1-based
    kind: str
    error: BaseException
    delay: float
    remaining: float


def call_with_retries(
    fn: Callable[[float], T],
    classify: Classifier,
    policy: RetryPolicy,
    *,
    what: str = "operation",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[Attempt], None] | None = None,
) -> T:
    """Call ``fn(remaining_seconds)`` until it succeeds, fails permanently or runs out of tries.

    ``fn`` receives the time left before the deadline so it can bound its own request timeout.
    An error ``classify`` returns None for is re-raised unchanged at once (permanent). A
    transient one is retried after a jittered backoff unless that would pass the deadline, the
    attempt limit or the kind's own cap; then RetriesExhausted (a RetriableError) is raised,
    chained to the last error.
    """
    start = clock()
    deadline = start + policy.deadline
    per_kind: dict[str, int] = {}
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - clock()
        try:
            return fn(max(remaining, 0.0))
        except Exception as exc:
            verdict = classify(exc)
            if verdict is None:
                raise
            retries_of_kind = per_kind.get(verdict.kind, 0)
            delay = policy.backoff(attempt, rand)
            remaining = deadline - clock()
            capped = verdict.max_retries is not None and retries_of_kind >= verdict.max_retries
            if attempt >= policy.max_attempts or capped or delay >= remaining:
                raise RetriesExhausted(
                    f"{what}: gave up after {attempt} attempt(s) in "
                    f"{clock() - start:.2f} s ({verdict.kind}: {exc})",
                    verdict.kind,
                    attempt,
                    exc,
                ) from exc
            per_kind[verdict.kind] = retries_of_kind + 1
            if on_retry is not None:
                on_retry(Attempt(attempt, verdict.kind, exc, delay, remaining))
            sleep(delay)
