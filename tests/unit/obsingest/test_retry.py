"""The retry helper's decisions: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import pytest

from obsingest import defaults
from obsingest.errors import RetriableError
from obsingest.retry import (
    BUDGET,
    OUTBOX_REDELIVERY,
    PUBSUB_PUBLISH,
    RetriesExhausted,
    RetryPolicy,
    Transient,
    api_core_retry,
    call_with_retries,
    google_transient,
)

pytestmark = pytest.mark.unit


class FakeClock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Flaky:
    """Fails with the given errors in order, then returns "ok"; records the time budgets seen."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.budgets: list[float] = []

    def __call__(self, remaining: float) -> str:
        self.calls += 1
        self.budgets.append(remaining)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Transient5xx(Exception):
    pass


class AuthHiccup(Exception):
    pass


class Permanent(Exception):
    pass


def classify(exc: BaseException) -> Transient | None:
    if isinstance(exc, Transient5xx):
        return Transient("http-503")
    if isinstance(exc, AuthHiccup):
        return Transient("http-403", max_retries=2)
    return None


DEFAULT = RetryPolicy()


def run(fn, policy=DEFAULT, rand=lambda: 1.0, clock=None):
    clock = clock or FakeClock()
    result = call_with_retries(fn, classify, policy, clock=clock.clock, sleep=clock.sleep, rand=rand)
    return result, clock


def test_success_after_transient_errors_with_growing_capped_backoff():
    fn = Flaky(Transient5xx(), Transient5xx(), Transient5xx(), Transient5xx())
    policy = RetryPolicy(max_attempts=6, base_delay=0.1, max_delay=0.5, deadline=10)
    result, clock = run(fn, policy)
    assert result == "ok" and fn.calls == 5
    # rand=1.0 shows the caps: 0.1, 0.2, 0.4, then capped at 0.5
    assert clock.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.5])


def test_full_jitter_scales_the_cap():
    fn = Flaky(Transient5xx(), Transient5xx())
    _, clock = run(fn, RetryPolicy(base_delay=0.2), rand=lambda: 0.25)
    assert clock.sleeps == pytest.approx([0.05, 0.1])


def test_permanent_error_is_raised_unchanged_at_once():
    fn = Flaky(Permanent("400 bad request"))
    with pytest.raises(Permanent):
        run(fn)
    assert fn.calls == 1


def test_attempt_limit_raises_a_retriable_error_chained_to_the_last_failure():
    fn = Flaky(*[Transient5xx(f"503 #{i}") for i in range(10)])
    with pytest.raises(RetriesExhausted) as info:
        run(fn, RetryPolicy(max_attempts=3, base_delay=0.01, deadline=10))
    assert fn.calls == 3
    assert isinstance(info.value, RetriableError)
    assert info.value.attempts == 3 and info.value.kind == "http-503"
    assert str(info.value.__cause__) == "503 #2"


def test_a_kind_cap_bounds_403_retries_below_the_attempt_limit():
    fn = Flaky(*[AuthHiccup("403") for _ in range(10)])
    with pytest.raises(RetriesExhausted) as info:
        run(fn, RetryPolicy(max_attempts=10, base_delay=0.01, deadline=10))
    assert fn.calls == 3  # first try + 2 retries
    assert info.value.kind == "http-403"


def test_transient_403_then_success():
    fn = Flaky(AuthHiccup("403"), AuthHiccup("403"))
    result, _ = run(fn, RetryPolicy(base_delay=0.01))
    assert result == "ok" and fn.calls == 3


def test_deadline_stops_retrying_before_a_wait_would_pass_it():
    fn = Flaky(*[Transient5xx() for _ in range(50)])
    policy = RetryPolicy(max_attempts=50, base_delay=1.0, max_delay=1.0, deadline=3.5)
    with pytest.raises(RetriesExhausted):
        run(fn, policy)
    # waits of 1 s each: after t=3 s the next wait would end at 4 s > 3.5 s deadline
    assert fn.calls == 4


def test_fn_is_told_the_time_left_before_the_deadline():
    fn = Flaky(Transient5xx(), Transient5xx())
    run(fn, RetryPolicy(base_delay=0.5, max_delay=0.5, deadline=5.0))
    assert fn.budgets == pytest.approx([5.0, 4.5, 4.0])


def test_on_retry_sees_each_failed_attempt():
    seen = []
    clock = FakeClock()
    call_with_retries(
        Flaky(Transient5xx("x"), AuthHiccup("y")),
        classify,
        RetryPolicy(base_delay=0.1),
        clock=clock.clock,
        sleep=clock.sleep,
        rand=lambda: 0.5,
        on_retry=seen.append,
    )
    assert [(a.number, a.kind) for a in seen] == [(1, "http-503"), (2, "http-403")]


def test_policy_validates_its_numbers():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(deadline=0)


# -- the named policies -----------------------------------------------------------------------
def test_budget_policy_jitters_six_tries_within_the_per_ccd_budget():
    fn = Flaky(*[Transient5xx() for _ in range(10)])
    with pytest.raises(RetriesExhausted) as info:
        run(fn, BUDGET)
    assert fn.calls == 6 and info.value.attempts == 6
    assert fn.budgets[0] == defaults.BUDGET_SECONDS
    assert [BUDGET.backoff(n, lambda: 0.5) for n in (1, 2, 5, 6)] == pytest.approx([0.025, 0.05, 0.4, 0.5])


def test_outbox_redelivery_schedules_five_deliveries_doubling_from_50_ms():
    assert OUTBOX_REDELIVERY.max_attempts == 5 and OUTBOX_REDELIVERY.deadline is None
    waits = [OUTBOX_REDELIVERY.backoff(n, lambda: 0.0) for n in range(1, 5)]
    assert waits == pytest.approx([0.05, 0.1, 0.2, 0.4])


def test_pubsub_publish_is_api_cores_retry_with_the_policys_backoff_and_the_callers_timeout():
    from google.api_core import exceptions as api_exceptions

    retry = api_core_retry(PUBSUB_PUBLISH, 2.5, api_exceptions.ResourceExhausted)
    assert (retry._initial, retry._maximum, retry._multiplier) == (0.1, 1.0, 4.0)
    assert retry._timeout == 2.5
    assert retry._predicate(api_exceptions.ServiceUnavailable("503"))
    assert retry._predicate(api_exceptions.ResourceExhausted("429"))  # added by the caller
    assert not retry._predicate(api_exceptions.NotFound("no topic"))


def test_google_transient_codes_are_the_ones_a_retry_can_fix():
    from google.api_core import exceptions as api_exceptions

    transient = google_transient()
    assert isinstance(api_exceptions.Aborted("x"), transient)
    assert isinstance(api_exceptions.Unknown("x"), transient)
    assert not isinstance(api_exceptions.PermissionDenied("x"), transient)
    assert not isinstance(api_exceptions.DeadlineExceeded("x"), transient)
