"""``GcsHttpStore``'s reads (the register function's read of a CCD's header), pure logic: the
request each read sends, what is taken from the answer's headers, and the answers mapped onto
the store's errors (missing object, refused, retried in transit). A scripted stand-in answers
the HTTP calls; the emulator serves them in tests/integration/test_direct_path.py and
test_register_malformed.py."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3

from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing
from obsingest.retry import RetriesExhausted
from obsingest.store.gcs import GcsHttpStore, GcsSettings, StoreUnavailable

pytestmark = pytest.mark.unit

DATA = b"SIMPLE  =                    T" + bytes(range(256)) * 40


@dataclass
class Answer:
    status: int
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


def stored(data: bytes = DATA, generation: int = 7, crc: str | None = None) -> dict[str, str]:
    crc = crc32c_b64(data) if crc is None else crc
    return {
        "x-goog-generation": str(generation),
        "x-goog-hash": f"crc32c={crc},md5=1B2M2Y8AsgTpgAmY7PhCfg==",
        "x-goog-stored-content-encoding": "identity",
    }


class ScriptedHttp:
    """Answers each ``urlopen`` with the next scripted answer (or raises it)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, dict[str, str] | None]] = []

    def urlopen(self, method: str, url: str, headers: Any = None, **_: Any) -> Answer:
        self.calls.append((method, url, headers))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def reader(http: ScriptedHttp) -> GcsHttpStore:
    settings = GcsSettings(base_delay=0, max_delay=0, max_attempts=3)
    return GcsHttpStore("bkt", settings, endpoint="http://gcs.invalid", http=http)


def test_read_head_is_one_ranged_media_get_with_generation_and_crc_from_its_headers() -> None:
    http = ScriptedHttp(Answer(206, DATA[:1024], stored(generation=42)))
    head = reader(http).read_head("raw/a b/c.fits", 1024)
    assert (head.data, head.generation, head.crc32c) == (DATA[:1024], 42, crc32c_b64(DATA))
    [(method, url, headers)] = http.calls
    assert method == "GET"
    assert url == "http://gcs.invalid/download/storage/v1/b/bkt/o/raw%2Fa%20b%2Fc.fits?alt=media"
    assert headers == {"range": "bytes=0-1023"}


def test_a_missing_object_is_object_missing_and_a_missing_bucket_is_unavailable() -> None:
    with pytest.raises(ObjectMissing):
        reader(ScriptedHttp(Answer(404, b"Not Found"))).read_head("x", 10)
    with pytest.raises(StoreUnavailable):
        reader(ScriptedHttp(Answer(404, b"The specified bucket does not exist."))).read("x")
    with pytest.raises(StoreUnavailable):  # refused: not the object's fault
        reader(ScriptedHttp(Answer(400, b"Bad Request"))).read("x")
    forbidden = [Answer(403, b"Forbidden")] * 3  # retried twice first, as every read's 403
    with pytest.raises(RetriesExhausted):
        reader(ScriptedHttp(*forbidden)).read("x")


def test_outages_and_resets_are_retried() -> None:
    reset = urllib3.exceptions.ProtocolError("connection reset")
    http = ScriptedHttp(Answer(503, b"busy"), reset, Answer(200, DATA, stored()))
    assert reader(http).read("x") == DATA
    assert len(http.calls) == 3


def test_bytes_damaged_in_transit_are_read_again_and_refused_if_they_stay_damaged() -> None:
    damaged = Answer(200, DATA[:-1] + b"!", stored())
    http = ScriptedHttp(damaged, Answer(200, DATA, stored()))
    assert reader(http).read("x") == DATA
    with pytest.raises(RetriesExhausted):
        reader(ScriptedHttp(damaged, damaged, damaged)).read("x")


def test_a_whole_read_of_a_transcoded_object_is_not_checked_against_the_stored_hash() -> None:
    headers = {**stored(crc="AAAAAA=="), "x-goog-stored-content-encoding": "gzip"}
    assert reader(ScriptedHttp(Answer(200, DATA, headers))).read("x") == DATA


def test_the_function_reads_a_bucket_through_it_and_never_loads_the_storage_library() -> None:
    """In a process of its own: this one may have loaded the library for other tests."""
    probe = (
        "import sys\n"
        "from functions.register import wiring\n"
        "from obsingest.settings import StoreSettings\n"
        "store = wiring.store_from_settings(StoreSettings(url='gs://bkt/any'))\n"
        "print(type(store).__name__, store.bucket, 'google.cloud.storage' in sys.modules)\n"
    )
    env = {**os.environ, "STORAGE_EMULATOR_HOST": "http://gcs.invalid"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["GcsHttpStore", "bkt", "False"]
