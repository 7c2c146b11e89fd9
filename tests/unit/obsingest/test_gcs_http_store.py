"""``GcsStore`` (one request per put, stat or read), pure logic: the multipart body the JSON
API expects, the media GET a read sends and what it takes from the answer's headers, the answers
mapped onto the store's errors (create-once 412 -> compare, 5xx/connection/damaged in transit ->
retried, 4xx -> permanent, a missing object). A scripted stand-in answers the HTTP calls; the
emulator serves them in tests/integration/test_backfill_gcs_upload.py and test_direct_path.py."""

from __future__ import annotations

import email
import email.policy
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import urllib3

from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing
from obsingest.retry import RetriesExhausted
from obsingest.store import ObjectConflict
from obsingest.store.gcs import (
    BucketMissing,
    GcsSettings,
    GcsStore,
    ObjectVanished,
    StoreRequestRefused,
    StoreUnavailable,
    endpoint_from_env,
    multipart_body,
)
from obsingest.store.notifications import stored_from_resource

pytestmark = pytest.mark.unit

DATA = b"SIMPLE  =                    T" + bytes(range(256)) * 4


@dataclass
class Answer:
    status: int
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedHttp:
    """Answers each ``urlopen`` with the next scripted answer (or raises it)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, bytes | None]] = []
        self.headers: list[Any] = []

    def urlopen(
        self, method: str, url: str, body: bytes | None = None, headers: Any = None, **_: Any
    ) -> Answer:
        self.calls.append((method, url, body))
        self.headers.append(headers)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def resource(data: bytes, generation: int = 7) -> bytes:
    return json.dumps(
        {
            "name": "a/b.fits",
            "size": str(len(data)),
            "crc32c": crc32c_b64(data),
            "generation": str(generation),
            "timeCreated": "2026-01-02T03:04:05.678Z",
        }
    ).encode()


def store(http: ScriptedHttp) -> GcsStore:
    settings = GcsSettings(base_delay=0, max_delay=0, max_attempts=3)
    return GcsStore("bkt", settings, endpoint="http://gcs.invalid", http=http)


def test_the_body_is_a_multipart_related_resource_then_the_bytes() -> None:
    body, content_type = multipart_body({"name": "x", "crc32c": "AAAAAA=="}, DATA)
    message = email.message_from_bytes(
        f"content-type: {content_type}\r\n\r\n".encode() + body, policy=email.policy.HTTP
    )
    parts = list(message.iter_parts())
    assert [p.get_content_type() for p in parts] == ["application/json", "application/fits"]
    payload = cast(bytes, parts[0].get_payload(decode=True))
    assert json.loads(payload) == {"name": "x", "crc32c": "AAAAAA=="}
    assert parts[1].get_payload(decode=True) == DATA
    # a new boundary each time: a file cannot be cut by a boundary it happens to contain
    assert multipart_body({}, DATA)[1] != content_type


def test_one_request_creates_and_the_answer_is_what_the_store_holds() -> None:
    http = ScriptedHttp(Answer(200, resource(DATA, 11)))
    up = store(http).put("a/b.fits", DATA, {"k": "v"})
    assert (up.created, up.obj.size, up.obj.crc32c, up.obj.generation) == (
        True,
        len(DATA),
        crc32c_b64(DATA),
        11,
    )
    [(method, url, _)] = http.calls
    assert method == "POST" and "uploadType=multipart" in url and "ifGenerationMatch=0" in url


def test_already_there_with_the_same_bytes_is_exists_after_one_get() -> None:
    http = ScriptedHttp(Answer(412, b"precondition"), Answer(200, resource(DATA, 5)))
    up = store(http).put("a/b.fits", DATA)
    assert (up.created, up.obj.generation) == (False, 5)
    assert [c[0] for c in http.calls] == ["POST", "GET"]
    assert http.calls[1][1].endswith("/storage/v1/b/bkt/o/a%2Fb.fits")


def test_already_there_with_other_bytes_is_a_conflict() -> None:
    other = b"other bytes"
    http = ScriptedHttp(Answer(412, b"precondition"), Answer(200, resource(other)))
    with pytest.raises(ObjectConflict) as caught:
        store(http).put("a/b.fits", DATA)
    assert caught.value.existing.size == len(other) and caught.value.reason == "checksum-conflict"


def test_already_there_then_gone_is_retriable() -> None:
    http = ScriptedHttp(Answer(412, b"precondition"), Answer(404, b"No such object"))
    with pytest.raises(ObjectVanished) as caught:
        store(http).put("a/b.fits", DATA)
    assert caught.value.retriable


def test_transient_answers_and_broken_connections_are_retried() -> None:
    http = ScriptedHttp(
        Answer(503, b"busy"), urllib3.exceptions.ProtocolError("reset"), Answer(200, resource(DATA))
    )
    assert store(http).put("a/b.fits", DATA).created
    assert len(http.calls) == 3


def test_bytes_refused_for_their_crc32c_are_resent_once() -> None:
    refused = Answer(
        400,
        b'{"error": {"message": "provided CRC32C \\"AAAAAA==\\" doesn\'t match '
        b'calculated CRC32C \\"BBBBBB==\\""}}',
    )
    http = ScriptedHttp(refused, Answer(200, resource(DATA)))
    assert store(http).put("a/b.fits", DATA).created
    http = ScriptedHttp(refused, refused, Answer(200, resource(DATA)))
    with pytest.raises(RetriesExhausted) as caught:
        store(http).put("a/b.fits", DATA)
    assert caught.value.kind == "checksum-mismatch" and len(http.calls) == 2


def test_retries_are_bounded() -> None:
    http = ScriptedHttp(*[Answer(503, b"busy")] * 3)
    with pytest.raises(RetriesExhausted) as caught:
        store(http).put("a/b.fits", DATA)
    assert caught.value.retriable and "http-503" in str(caught.value)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (Answer(404, b"bucket not found"), BucketMissing),
        (Answer(400, b"invalid object name"), StoreRequestRefused),
    ],
)
def test_refusals_are_permanent_at_once(answer: Answer, error: type[Exception]) -> None:
    http = ScriptedHttp(answer)
    with pytest.raises(error) as caught:
        store(http).put("a/b.fits", DATA)
    assert not caught.value.retriable and len(http.calls) == 1  # type: ignore[attr-defined]


def test_delete_is_one_request_a_missing_object_is_done_and_a_missing_bucket_not_found() -> None:
    from google.api_core import exceptions as api_exceptions

    http = ScriptedHttp(
        Answer(204, b""),
        Answer(404, b"No such object: bkt/bucket/b.fits"),
        Answer(404, b"The specified bucket does not exist."),
    )
    store(http).delete("a/b.fits")
    assert http.calls == [("DELETE", "http://gcs.invalid/storage/v1/b/bkt/o/a%2Fb.fits", None)]
    store(http).delete("bucket/b.fits")  # a name with "bucket" in it is still an object's 404
    assert len(http.calls) == 2
    with pytest.raises(api_exceptions.NotFound):
        store(http).delete("a/b.fits")


def test_the_resource_becomes_a_stored_object() -> None:
    obj = stored_from_resource(json.loads(resource(DATA, 9)), "bkt")
    assert (obj.size, obj.generation, obj.uri) == (len(DATA), 9, "gs://bkt/a/b.fits")
    assert obj.time_created.tzinfo is not None


def test_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    assert endpoint_from_env() == "https://storage.googleapis.com"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443/")
    assert endpoint_from_env() == "http://127.0.0.1:4443"


# reads: one media GET each -----------------------------------------------------------------

RDATA = b"SIMPLE  =                    T" + bytes(range(256)) * 40


def stored(data: bytes = RDATA, generation: int = 7, crc: str | None = None) -> dict[str, str]:
    crc = crc32c_b64(data) if crc is None else crc
    return {
        "x-goog-generation": str(generation),
        "x-goog-hash": f"crc32c={crc},md5=1B2M2Y8AsgTpgAmY7PhCfg==",
        "x-goog-stored-content-encoding": "identity",
    }


def test_read_head_is_one_ranged_media_get_with_generation_and_crc_from_its_headers() -> None:
    http = ScriptedHttp(Answer(206, RDATA[:1024], stored(generation=42)))
    head = store(http).read_head("raw/a b/c.fits", 1024)
    assert (head.data, head.generation, head.crc32c) == (RDATA[:1024], 42, crc32c_b64(RDATA))
    [(method, url, _)] = http.calls
    assert method == "GET"
    assert url == "http://gcs.invalid/download/storage/v1/b/bkt/o/raw%2Fa%20b%2Fc.fits?alt=media"
    assert http.headers == [{"range": "bytes=0-1023"}]


def test_a_missing_object_is_object_missing_and_a_missing_bucket_is_unavailable() -> None:
    with pytest.raises(ObjectMissing):
        store(ScriptedHttp(Answer(404, b"Not Found"))).read_head("x", 10)
    with pytest.raises(StoreUnavailable):
        store(ScriptedHttp(Answer(404, b"The specified bucket does not exist."))).read("x")
    with pytest.raises(StoreUnavailable):  # refused: not the object's fault
        store(ScriptedHttp(Answer(400, b"Bad Request"))).read("x")
    forbidden = [Answer(403, b"Forbidden")] * 3  # retried twice first, as every read's 403
    with pytest.raises(RetriesExhausted):
        store(ScriptedHttp(*forbidden)).read("x")


def test_outages_and_resets_are_retried() -> None:
    reset = urllib3.exceptions.ProtocolError("connection reset")
    http = ScriptedHttp(Answer(503, b"busy"), reset, Answer(200, RDATA, stored()))
    assert store(http).read("x") == RDATA
    assert len(http.calls) == 3


def test_bytes_damaged_in_transit_are_read_again_and_refused_if_they_stay_damaged() -> None:
    damaged = Answer(200, RDATA[:-1] + b"!", stored())
    http = ScriptedHttp(damaged, Answer(200, RDATA, stored()))
    assert store(http).read("x") == RDATA
    with pytest.raises(RetriesExhausted):
        store(ScriptedHttp(damaged, damaged, damaged)).read("x")


def test_a_whole_read_of_a_transcoded_object_is_not_checked_against_the_stored_hash() -> None:
    headers = {**stored(crc="AAAAAA=="), "x-goog-stored-content-encoding": "gzip"}
    assert store(ScriptedHttp(Answer(200, RDATA, headers))).read("x") == RDATA


def test_the_function_reads_a_bucket_through_it_and_never_loads_the_storage_library() -> None:
    """In a process of its own: this one may have loaded the library for other tests."""
    probe = (
        "import sys\n"
        "from functions.register import wiring\n"
        "from obsingest.settings import StoreSettings\n"
        "store = wiring.open_store(StoreSettings(url='gs://bkt/any'))\n"
        "print(type(store).__name__, store.bucket, 'google.cloud.storage' in sys.modules)\n"
    )
    env = {**os.environ, "STORAGE_EMULATOR_HOST": "http://gcs.invalid"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["GcsStore", "bkt", "False"]


# where requests go: the endpoint's own pool when google-auth's wrapper would add nothing ------


def test_an_anonymous_wrapper_sends_to_the_endpoints_pool_by_path() -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.urllib3 import AuthorizedHttp

    wrapped = AuthorizedHttp(AnonymousCredentials(), http=urllib3.PoolManager())
    gcs = GcsStore("bkt", GcsSettings(), endpoint="http://gcs.invalid:4443", http=wrapped)
    pool = ScriptedHttp(Answer(200, resource(DATA)))
    assert gcs._pool is not None and gcs._pool.host == "gcs.invalid" and gcs._pool.port == 4443
    gcs._pool = pool
    gcs.put("a/b.fits", DATA)
    [(method, url, _)] = pool.calls
    assert method == "POST"
    assert url == "/upload/storage/v1/b/bkt/o?uploadType=multipart&ifGenerationMatch=0"


def test_credentials_a_proxy_or_a_callers_http_keep_every_request_on_http() -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.urllib3 import AuthorizedHttp
    from google.oauth2.credentials import Credentials

    def pool_of(http: Any) -> Any:
        return GcsStore("bkt", GcsSettings(), endpoint="http://gcs.invalid", http=http)._pool

    assert pool_of(AuthorizedHttp(Credentials("token"), http=urllib3.PoolManager())) is None
    proxied = urllib3.ProxyManager("http://proxy.invalid:3128")
    assert pool_of(AuthorizedHttp(AnonymousCredentials(), http=proxied)) is None
    assert pool_of(ScriptedHttp()) is None
