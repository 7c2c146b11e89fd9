"""GcsStore's error handling, on a fake client: classification, create-once, bounded retries."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

import pytest
import requests
from google.api_core import exceptions as api_exceptions

from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing, PermanentError, RetriableError
from obsingest.store.gcs import (
    BucketMissing,
    GcsSettings,
    GcsStore,
    StorePermissionDenied,
    StoreRequestRefused,
    StoreUnavailable,
    classify_gcs_error,
)

pytestmark = pytest.mark.unit


def http(status: int, message: str = "x") -> Exception:
    return api_exceptions.from_http_status(status, message)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_throttling_and_server_errors_are_transient(status):
    verdict = classify_gcs_error(http(status))
    assert verdict is not None and verdict.kind == f"http-{status}"
    assert verdict.max_retries is None


def test_403_is_transient_but_capped():
    verdict = classify_gcs_error(http(403), auth_retries=2)
    assert verdict is not None and verdict.max_retries == 2


@pytest.mark.parametrize("status", [400, 401, 404, 405, 409, 412])
def test_client_errors_are_permanent(status):
    assert classify_gcs_error(http(status)) is None


@pytest.mark.parametrize(
    "exc",
    [
        requests.ConnectionError("reset"),
        requests.Timeout("read timed out"),
        ConnectionResetError(104, "Connection reset by peer"),
        ConnectionAbortedError("aborted"),
        TimeoutError(),
        requests.exceptions.ChunkedEncodingError("broken"),
    ],
)
def test_dropped_connections_and_timeouts_are_transient(exc):
    assert classify_gcs_error(exc) is not None


@pytest.mark.parametrize(
    "message",
    [
        'provided MD5 hash "A" doesn\'t match calculated',
        'Provided CRC32C "AAAAAA==" doesn\'t match calculated CRC32C "QDLllw=="',
    ],
)
def test_a_checksum_refusal_is_retried_once(message):
    verdict = classify_gcs_error(http(400, message))
    assert verdict is not None and verdict.max_retries == 1


def test_another_bad_request_is_not_retried():
    assert classify_gcs_error(http(400, "Invalid argument: object name too long")) is None


def test_programming_errors_are_not_retried():
    assert classify_gcs_error(ValueError("bug")) is None


# -- a fake storage client -------------------------------------------------------------------
class FakeBlob:
    def __init__(self, bucket: FakeBucket, name: str) -> None:
        self.bucket, self.name = bucket, name
        self.metadata: dict | None = None
        self.md5_hash: str | None = None
        self.crc32c: str | None = None
        self.size: int | None = None
        self.generation: int | None = None
        self.time_created: datetime | None = None

    def _fill(self, data: bytes, metadata: dict) -> FakeBlob:
        self.size, self.crc32c = len(data), crc32c_b64(data)
        self.md5_hash = base64.b64encode(hashlib.md5(data).digest()).decode()  # as the service
        self.generation, self.time_created = 7, datetime(2026, 1, 1, tzinfo=UTC)
        self.metadata = metadata
        return self

    def upload_from_string(self, data, *, if_generation_match, checksum, retry, timeout, **kw):
        assert if_generation_match == 0 and checksum == "crc32c" and retry is None
        assert self.md5_hash is None  # CRC32C (checksum=) guards the transfer; no client MD5
        self.bucket.calls.append(("put", self.name))
        self.bucket.fail("put")
        if self.name in self.bucket.objects:
            raise http(412, "precondition failed")
        self.bucket.objects[self.name] = (data, dict(self.metadata or {}))
        self._fill(data, dict(self.metadata or {}))

    def download_as_bytes(self, *, checksum, retry, timeout):
        self.bucket.calls.append(("read", self.name))
        self.bucket.fail("read")
        if self.name not in self.bucket.objects:
            raise http(404, "no such object")
        return self.bucket.objects[self.name][0]


class FakeBucket:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, dict]] = {}
        self.failures: dict[str, list[Exception]] = {}
        self.calls: list[tuple[str, str]] = []

    def fail(self, op: str) -> None:
        queue = self.failures.get(op) or []
        if queue:
            raise queue.pop(0)

    def blob(self, name: str) -> FakeBlob:
        return FakeBlob(self, name)

    def get_blob(self, name, *, retry, timeout):
        self.calls.append(("stat", name))
        self.fail("stat")
        if name not in self.objects:
            return None
        data, meta = self.objects[name]
        return FakeBlob(self, name)._fill(data, meta)


class FakeClient:
    def __init__(self) -> None:
        self.the_bucket = FakeBucket()

    def bucket(self, name: str) -> FakeBucket:
        return self.the_bucket


@pytest.fixture
def store():
    settings = GcsSettings(base_delay=0.0, max_delay=0.0, deadline_seconds=5.0)
    return GcsStore("b", client=FakeClient(), settings=settings)


def test_put_retries_503_and_connection_resets(store):
    bucket = store.client.the_bucket
    bucket.failures["put"] = [http(503), ConnectionResetError("reset")]
    assert store.put("raw/x", b"abc").created
    assert bucket.calls.count(("put", "raw/x")) == 3


def test_lost_ack_retry_finds_its_own_bytes(store):
    """The first write landed but its answer was lost: the retry's 412 resolves to success."""
    bucket = store.client.the_bucket
    bucket.objects["raw/x"] = (b"abc", {})
    bucket.failures["put"] = [requests.Timeout("read timed out")]
    result = store.put("raw/x", b"abc")
    assert not result.created


def test_stat_retries_a_transient_403(store):
    store.put("raw/x", b"abc")
    store.client.the_bucket.failures["stat"] = [http(403), http(403)]
    assert store.stat("raw/x").size == 3


def test_a_persistent_403_gives_up_after_the_cap_as_retriable(store):
    store.put("raw/x", b"abc")
    bucket = store.client.the_bucket
    bucket.failures["stat"] = [http(403) for _ in range(10)]
    with pytest.raises(RetriableError):
        store.stat("raw/x")
    assert bucket.calls.count(("stat", "raw/x")) == 3


def test_exhausted_5xx_is_retriable(store):
    store.client.the_bucket.failures["read"] = [http(503) for _ in range(20)]
    with pytest.raises(RetriableError):
        store.read("raw/x")


def test_missing_object_on_read_and_stat(store):
    with pytest.raises(ObjectMissing):
        store.read("raw/nope")
    with pytest.raises(ObjectMissing):
        store.stat("raw/nope")


@pytest.mark.parametrize(
    ("status", "error"), [(404, BucketMissing), (401, StorePermissionDenied), (400, StoreRequestRefused)]
)
def test_permanent_put_errors_surface_at_once(store, status, error):
    bucket = store.client.the_bucket
    bucket.failures["put"] = [http(status)]
    with pytest.raises(error) as info:
        store.put("raw/x", b"abc")
    assert isinstance(info.value, PermanentError)
    assert bucket.calls.count(("put", "raw/x")) == 1


@pytest.mark.parametrize(
    ("status", "text"),
    [(401, "unauthorized"), (403, "forbidden"), (400, "bad request"), (404, "bucket not found")],
)
def test_facility_side_read_errors_that_are_not_the_objects_fault_are_retriable(store, status, text):
    """A wrong credential or bucket must make the event redeliver, never quarantine a CCD."""
    store.put("raw/x", b"abc")
    bucket = store.client.the_bucket
    bucket.failures["read"] = [http(status, text) for _ in range(10)]
    bucket.failures["stat"] = [http(status, text) for _ in range(10)]
    with pytest.raises(RetriableError) as info:
        store.read("raw/x")
    assert not isinstance(info.value, PermanentError)
    if status != 403:  # 403 is retried first (transient auth), then gives up as retriable
        assert isinstance(info.value, StoreUnavailable)
    with pytest.raises(RetriableError):
        store.stat("raw/x")


def test_a_429_storm_ends_as_rate_limited_retriable(store):
    """Issue 21: a resource run out is an outage with its reason, for the caller's backoff."""
    from obsingest.errors import RateLimited

    bucket = store.client.the_bucket
    bucket.failures["put"] = [http(429, "Too Many Requests") for _ in range(20)]
    with pytest.raises(RateLimited) as caught:
        store.put("raw/x", b"abc")
    assert caught.value.retriable and caught.value.reason == "rate-limited"
    assert "gs://b" in str(caught.value)
    assert bucket.calls.count(("put", "raw/x")) == store.policy.max_attempts


@pytest.mark.parametrize(
    ("reason", "error"), [("rateLimitExceeded", "RateLimited"), ("quotaExceeded", "QuotaExceeded")]
)
def test_a_quota_or_rate_403_is_not_capped_as_auth_nor_permanent(store, reason, error):
    """GCS answers some rate and quota refusals 403: retried like any outage (not the two
    tries of an auth hiccup), then retriable with the reason, never StorePermissionDenied."""
    import obsingest.errors

    bucket = store.client.the_bucket
    bucket.failures["put"] = [
        api_exceptions.Forbidden("limit", errors=[{"reason": reason}]) for _ in range(20)
    ]
    with pytest.raises(getattr(obsingest.errors, error)):
        store.put("raw/x", b"abc")
    assert bucket.calls.count(("put", "raw/x")) == store.policy.max_attempts
    bucket.failures["put"] = [api_exceptions.Forbidden("limit", errors=[{"reason": reason}])]
    assert store.put("raw/x", b"abc").created  # healed at the next try
