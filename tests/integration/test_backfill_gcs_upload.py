"""The backfill's lean create-once upload (``GcsStore``) on the GCS emulator: one request
creates and returns what the store holds; the same bytes again are "exists" (nothing rewritten);
other bytes are a conflict that leaves the stored object alone; bytes that do not match the
declared CRC32C are refused; a missing bucket is a permanent error; awkward object names survive
the round trip."""

from __future__ import annotations

import pytest

from obsingest.checksums import crc32c_b64
from obsingest.retry import RetriesExhausted
from obsingest.store import ObjectConflict
from obsingest.store import gcs as gcs_store
from obsingest.store.gcs import BucketMissing, GcsSettings, GcsStore
from tests.integration.fixtures.handles import GcsService

pytestmark = pytest.mark.integration

DATA = b"SIMPLE  =                    T / backfill" * 100


def uploader(gcs: GcsService, bucket: str) -> GcsStore:
    return GcsStore(bucket, GcsSettings(project=gcs.project_id, base_delay=0.01, max_attempts=3))


@pytest.mark.parametrize("name", ["a/b/file-0001.fits.fz", "night 1/#7?x=1&y/é ü.fits"])
def test_create_once_then_exists_with_the_same_generation(gcs: GcsService, name: str) -> None:
    bucket = gcs.new_bucket("lean")
    up = uploader(gcs, bucket)
    first = up.put(name, DATA, {"obsingest-checksum": "crc32c:x"})
    assert first.created and first.obj.size == len(DATA) and first.obj.crc32c == crc32c_b64(DATA)
    again = up.put(name, DATA)
    assert not again.created and again.obj.generation == first.obj.generation
    [blob] = list(gcs.client().list_blobs(bucket))
    assert blob.name == name and blob.generation == first.obj.generation
    assert blob.crc32c == crc32c_b64(DATA) and blob.metadata == {"obsingest-checksum": "crc32c:x"}
    assert blob.download_as_bytes() == DATA


def test_other_bytes_under_the_same_name_are_a_conflict(gcs: GcsService) -> None:
    bucket = gcs.new_bucket("lean")
    up = uploader(gcs, bucket)
    first = up.put("x.fits", DATA)
    other = DATA[::-1] + b"!"
    with pytest.raises(ObjectConflict) as caught:
        up.put("x.fits", other)
    assert caught.value.existing.generation == first.obj.generation
    assert gcs.client().bucket(bucket).blob("x.fits").download_as_bytes() == DATA


def test_bytes_that_do_not_match_the_declared_crc32c_are_refused(
    gcs: GcsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = gcs.new_bucket("lean")
    monkeypatch.setattr(gcs_store, "crc32c_b64", lambda data: crc32c_b64(data + b"damaged"))
    with pytest.raises(RetriesExhausted) as caught:
        uploader(gcs, bucket).put("bad.fits", DATA)
    # damaged on the way: resent once, then left for the backfill's next round (never acked)
    assert caught.value.retriable and caught.value.kind == "checksum-mismatch"
    assert caught.value.attempts == 2
    assert list(gcs.client().list_blobs(bucket)) == []


def test_a_missing_bucket_is_permanent(gcs: GcsService) -> None:
    with pytest.raises(BucketMissing) as caught:
        uploader(gcs, "no-such-bucket-obsingest-h20").put("x", DATA)
    assert not caught.value.retriable
