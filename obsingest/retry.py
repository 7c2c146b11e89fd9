"""The one retry helper: tenacity driven by the project's named policies.

Own policies because with 5 s from readout to announcement a retry must stop at the caller's
deadline, retry only what ``classify`` says can heal, and cap some kinds tighter (a transient 403).
Clock, sleep and randomness are injectable for tests.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import tenacity

from obsingest import defaults
from obsingest.errors import RetriableError

T = TypeVar("T")


@dataclass(frozen=True)
class Transient:
    """``classify``'s verdict for an error worth retrying: ``kind`` names it in logs and the
    final error; ``max_retries`` caps retries of this kind below the policy's own limit."""

    kind: str
    max_retries: int | None = None


Classifier = Callable[[BaseException], "Transient | None"]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts, backoff curve and an overall deadline (seconds; None: none).
    ``jitter``: wait uniform in [0, cap), so many clients retrying at once spread out."""

    max_attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 1.0
    multiplier: float = 2.0
    deadline: float | None = defaults.BUDGET_SECONDS
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must be >= 0")
        if self.deadline is not None and self.deadline <= 0:
            raise ValueError("the deadline must be > 0")

    @classmethod
    def doubling(cls, max_attempts: int, first_delay: float) -> RetryPolicy:
        """A late result is still a result: waits of first_delay, 2x, 4x ..., no deadline."""
        return cls(max_attempts, first_delay, math.inf, 2.0, None, jitter=False)

    def backoff_cap(self, retry: int) -> float:
        """Upper bound of the wait before retry number ``retry`` (1-based)."""
        return min(self.max_delay, self.base_delay * self.multiplier ** (retry - 1))

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number ``retry`` (1-based)."""
        cap = self.backoff_cap(retry)
        return rand() * cap if self.jitter else cap


#: Storage and bus calls on the per-CCD path: jittered, at most 6 tries within the 5 s budget.
BUDGET = RetryPolicy()
#: The local store's finalize events redelivered to their handler before dead-lettering.
OUTBOX_REDELIVERY = RetryPolicy.doubling(5, 0.05)
#: Pub/Sub Publish, retried by api_core inside the RPC; the publisher's timeout is the deadline.
PUBSUB_PUBLISH = RetryPolicy(base_delay=0.1, max_delay=1.0, multiplier=4.0)


@cache
def google_transient() -> tuple[type[Exception], ...]:
    """Google API errors a retry can fix: the codes the Pub/Sub client's generated methods
    retry (imported on first use, as the clients are)."""
    from google.api_core import exceptions as api_exceptions

    return (
        api_exceptions.Aborted,
        api_exceptions.InternalServerError,
        api_exceptions.ServiceUnavailable,
        api_exceptions.Unknown,
    )


def api_core_retry(policy: RetryPolicy, timeout: float, *also: type[Exception]) -> Any:
    """``policy``'s backoff as a ``google.api_core`` Retry over ``google_transient()`` and
    ``also``, bounded by ``timeout`` seconds overall (api_core jitters every wait)."""
    from google.api_core import retry as retries

    return retries.Retry(
        initial=policy.base_delay,
        maximum=policy.max_delay,
        multiplier=policy.multiplier,
        predicate=retries.if_exception_type(*google_transient(), *also),
        timeout=timeout,
    )


class RetriesExhausted(RetriableError, reason="retries-exhausted"):
    """Every allowed attempt failed transiently; the operation may succeed later."""

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


def call_with_retries(
    fn: Callable[[float], T],
    classify: Classifier,
    policy: RetryPolicy = BUDGET,
    *,
    what: str = "operation",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[Attempt], None] | None = None,
) -> T:
    """Call ``fn(remaining_seconds)`` until it succeeds, fails permanently (``classify`` says
    None: re-raised at once) or passes the deadline, attempt limit or kind's cap: then
    RetriesExhausted (retriable), chained to the last error."""
    start = clock()
    deadline = math.inf if policy.deadline is None else start + policy.deadline
    per_kind: dict[str, int] = {}
    seen: list[Transient] = []  # the verdict on the last failure

    def retry(state: tenacity.RetryCallState) -> bool:
        kind = classify(_error(state)) if state.outcome and state.outcome.failed else None
        seen[:] = [kind] if kind is not None else []
        return kind is not None

    def stop(state: tenacity.RetryCallState) -> bool:
        kind = seen[0]
        capped = kind.max_retries is not None and per_kind.get(kind.kind, 0) >= kind.max_retries
        return (
            state.attempt_number >= policy.max_attempts
            or capped
            or state.upcoming_sleep >= deadline - clock()
        )

    def before_sleep(state: tenacity.RetryCallState) -> None:
        kind = seen[0].kind
        per_kind[kind] = per_kind.get(kind, 0) + 1
        if on_retry is not None:
            on_retry(Attempt(state.attempt_number, kind, _error(state), state.upcoming_sleep))

    def give_up(state: tenacity.RetryCallState) -> T:
        error, kind = _error(state), seen[0].kind
        raise RetriesExhausted(
            f"{what}: gave up after {state.attempt_number} attempt(s) in "
            f"{clock() - start:.2f} s ({kind}: {error})",
            kind,
            state.attempt_number,
            error,
        ) from error

    retrying = tenacity.Retrying(
        retry=retry,
        wait=lambda state: policy.backoff(state.attempt_number, rand),
        stop=stop,
        sleep=sleep,
        before_sleep=before_sleep,
        retry_error_callback=give_up,
    )
    return retrying(lambda: fn(max(deadline - clock(), 0.0)))


def _error(state: tenacity.RetryCallState) -> BaseException:
    assert state.outcome is not None and state.outcome.failed
    error = state.outcome.exception()
    assert error is not None
    return error
