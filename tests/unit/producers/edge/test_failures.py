"""The edge's verdict on a failed attempt: an exhausted resource is an outage, never a crash
counted towards quarantine, never a quarantine (issue 21)."""

from __future__ import annotations

import errno

import pytest

from obsingest.errors import CorruptFile, DestinationFull, OutOfMemory, RateLimited
from obsingest.retry import RetriesExhausted
from producers.edge.errors import SourceUnreadable, SpoolFull, UnexpectedError, WorkerCrashed
from producers.edge.failures import judge

pytestmark = pytest.mark.unit


def test_a_full_destination_raised_raw_is_a_destination_outage() -> None:
    """What an older store let escape: OSError 28 from the worker, not an unexpected error."""
    verdict = judge(OSError(errno.ENOSPC, "No space left on device"), "file:///data/store")
    assert verdict.action == "retry" and verdict.destination_fault
    assert isinstance(verdict.error, DestinationFull)
    assert verdict.error.reason == "destination-full"
    assert "file:///data/store" in str(verdict.error)


def test_an_error_the_worker_could_not_send_back_is_read_by_its_words() -> None:
    error = UnexpectedError("OSError: [Errno 28] No space left on device (unpicklable: x)")
    verdict = judge(error, "file:///d")
    assert verdict.action == "retry" and verdict.exhausted and verdict.destination_fault


def test_classified_exhaustion_keeps_its_reason() -> None:
    error = RateLimited("destination gs://b: rate limited", "destination", "gs://b")
    verdict = judge(error)
    assert (verdict.action, verdict.error, verdict.destination_fault) == ("retry", error, True)


def test_a_rate_limit_after_the_stores_own_retries_is_rate_limited() -> None:
    from google.api_core import exceptions as api_exceptions

    last = api_exceptions.TooManyRequests("slow down")
    error = RetriesExhausted("gcs put: gave up", "http-429", 6, last)
    error.__cause__ = last
    verdict = judge(error, "gs://b")
    assert verdict.action == "retry" and verdict.error.reason == "rate-limited"


def test_memory_is_the_ccds_own_backoff_not_the_destinations() -> None:
    verdict = judge(MemoryError())
    assert verdict.action == "retry" and not verdict.destination_fault
    assert isinstance(verdict.error, OutOfMemory)


@pytest.mark.parametrize(
    ("error", "action", "destination_fault"),
    [
        (CorruptFile("truncated"), "quarantine", False),
        (WorkerCrashed("SIGKILL"), "crash", False),
        (ValueError("a bug"), "crash", False),
        (SourceUnreadable("EIO"), "retry", False),
        (SpoolFull("spool full"), "retry", False),
        (RetriesExhausted("gcs put: gave up", "http-503", 6, RuntimeError("503")), "retry", True),
    ],
    ids=repr,
)
def test_everything_else_as_before(error, action, destination_fault) -> None:
    verdict = judge(error)
    assert (verdict.action, verdict.destination_fault) == (action, destination_fault)
    assert verdict.exhausted is None  # a full spool is said by refusing new work


def test_a_store_refusing_one_objects_request_quarantines_that_ccd_alone() -> None:
    """A 400 for one object (its name, its metadata) was the destination's fault: the whole
    edge backed off and probed for an outage that was not one, and the CCD was retried for
    ever. A missing bucket or a denied permission still is the destination's."""
    from obsingest.store.gcs import BucketMissing, StorePermissionDenied, StoreRequestRefused

    verdict = judge(StoreRequestRefused("put 'raw/x.fits': refused with HTTP 400 (Invalid argument.)"))
    assert (verdict.action, verdict.destination_fault, verdict.error.reason) == (
        "quarantine",
        False,
        "store-request-refused",
    )
    for error in (BucketMissing("put: bucket 'b' not found"), StorePermissionDenied("put: denied")):
        assert (judge(error).action, judge(error).destination_fault) == ("retry", True)
