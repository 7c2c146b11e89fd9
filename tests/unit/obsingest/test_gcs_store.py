"""GcsStore's error handling, on a fake JSON API: classification, create-once, bounded retries."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import urllib3
from google.api_core import exceptions as api_exceptions
from google.auth.exceptions import TransportError

from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing, PermanentError, RetriableError
from obsingest.store.gcs import (
    BucketMissing,
    DataCorruption,
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
        TransportError("reset"),
        ConnectionResetError(104, "Connection reset by peer"),
        ConnectionAbortedError("aborted"),
        TimeoutError(),
        DataCorruption("crc32c differs"),
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


# -- a fake JSON API ----------------------------------------------------------------------------
@dataclass
class Answer:
    status: int
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


class FakeBucket:
    """Answers the store's requests (upload, object GET, media GET) as GCS would, after raising
    or answering the failures queued for ``put``, ``stat`` or ``read``."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, dict]] = {}
        self.failures: dict[str, list[Exception | Answer]] = {}
        self.calls: list[tuple[str, str]] = []

    def resource(self, name: str) -> bytes:
        data, meta = self.objects[name]
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()  # as the service
        fields = {"name": name, "size": str(len(data)), "crc32c": crc32c_b64(data), "md5Hash": md5}
        return json.dumps({**fields, "generation": "7", "metadata": meta}).encode()

    def urlopen(self, method: str, url: str, body: bytes | None = None, **_: Any) -> Answer:
        path = urlsplit(url).path
        if method == "POST":
            op, resource = "put", json.loads((body or b"").split(b"\r\n")[3])
            name = resource["name"]
        else:
            op, name = ("read" if "/download/" in path else "stat"), unquote(path.rsplit("/", 1)[1])
        self.calls.append((op, name))
        queue = self.failures.get(op) or []
        if queue:
            failure = queue.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure
        if op == "put":
            assert "ifGenerationMatch=0" in url and "md5Hash" not in resource  # CRC32C guards it
            if name in self.objects:
                return Answer(412, b"precondition failed")
            self.objects[name] = (
                (body or b"").split(b"\r\n\r\n", 2)[2].rsplit(b"\r\n", 1)[0],
                resource["metadata"],
            )
        elif name not in self.objects:
            return Answer(404, b"No such object")
        if op == "read":
            data = self.objects[name][0]
            return Answer(200, data, {"x-goog-hash": f"crc32c={crc32c_b64(data)}"})
        return Answer(200, self.resource(name))


def http_answer(status: int, text: str = "x") -> Answer:
    return Answer(status, text.encode())


@pytest.fixture
def store():
    settings = GcsSettings(base_delay=0.0, max_delay=0.0, deadline_seconds=5.0)
    return GcsStore("b", settings, endpoint="http://gcs.invalid", http=FakeBucket())


def test_put_retries_503_and_connection_resets(store):
    bucket = store.http
    bucket.failures["put"] = [http_answer(503), urllib3.exceptions.ProtocolError("reset")]
    assert store.put("raw/x", b"abc").created
    assert bucket.calls.count(("put", "raw/x")) == 3


def test_lost_ack_retry_finds_its_own_bytes(store):
    """The first write landed but its answer was lost: the retry's 412 resolves to success."""
    bucket = store.http
    bucket.objects["raw/x"] = (b"abc", {})
    bucket.failures["put"] = [urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")]
    result = store.put("raw/x", b"abc")
    assert not result.created


def test_stat_retries_a_transient_403(store):
    store.put("raw/x", b"abc")
    store.http.failures["stat"] = [http_answer(403), http_answer(403)]
    assert store.stat("raw/x").size == 3


def test_a_persistent_403_gives_up_after_the_cap_as_retriable(store):
    store.put("raw/x", b"abc")
    bucket = store.http
    bucket.failures["stat"] = [http_answer(403) for _ in range(10)]
    with pytest.raises(RetriableError):
        store.stat("raw/x")
    assert bucket.calls.count(("stat", "raw/x")) == 3


def test_exhausted_5xx_is_retriable(store):
    store.http.failures["read"] = [http_answer(503) for _ in range(20)]
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
    bucket = store.http
    bucket.failures["put"] = [http_answer(status)]
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
    bucket = store.http
    bucket.failures["read"] = [http_answer(status, text) for _ in range(10)]
    bucket.failures["stat"] = [http_answer(status, text) for _ in range(10)]
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

    bucket = store.http
    bucket.failures["put"] = [http_answer(429, "Too Many Requests") for _ in range(20)]
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

    bucket = store.http
    limit = Answer(403, json.dumps({"error": {"code": 403, "errors": [{"reason": reason}]}}).encode())
    bucket.failures["put"] = [limit for _ in range(20)]
    with pytest.raises(getattr(obsingest.errors, error)):
        store.put("raw/x", b"abc")
    assert bucket.calls.count(("put", "raw/x")) == store.policy.max_attempts
    bucket.failures["put"] = [limit]
    assert store.put("raw/x", b"abc").created  # healed at the next try
