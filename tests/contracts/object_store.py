"""The ``ObjectStore`` contract (obsingest/store/base.py): create-once writes, idempotent
same-bytes retries, conflicts that never overwrite, strict reads. Subclasses provide ``store``."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing
from obsingest.store.base import ObjectConflict, ObjectStore

NAME = "raw/LSSTComCam/20261122/2026112200001/LSSTComCam_2026112200001_004.fits.fz"
DATA = b"SIMPLE  = " + bytes(range(256)) * 40


class ObjectStoreContract:
    """Provide a fixture ``store`` returning an empty store of the backend under test."""

    def test_put_creates_then_the_same_bytes_again_is_an_idempotent_success(self, store: ObjectStore) -> None:
        first = store.put(NAME, DATA, {"obsingest-checksum": "crc32c:1"})
        again = store.put(NAME, DATA, {"obsingest-checksum": "crc32c:1"})
        assert first.created and not again.created
        assert again.obj.generation == first.obj.generation
        assert first.obj.size == len(DATA) and first.obj.crc32c == crc32c_b64(DATA)
        assert store.read(NAME) == DATA

    def test_different_bytes_under_an_existing_name_conflict_and_never_overwrite(
        self, store: ObjectStore
    ) -> None:
        store.put(NAME, DATA)
        with pytest.raises(ObjectConflict) as info:
            store.put(NAME, DATA[:-1] + b"X")
        assert info.value.existing.crc32c == crc32c_b64(DATA)
        assert info.value.attempted_crc32c == crc32c_b64(DATA[:-1] + b"X")
        assert not info.value.retriable and info.value.reason == "checksum-conflict"
        assert store.read(NAME) == DATA

    def test_stat_carries_size_checksum_and_custom_metadata(self, store: ObjectStore) -> None:
        store.put(NAME, DATA, {"obsingest-readout-time": "2026-11-22T01:02:03+00:00"})
        obj = store.stat(NAME)
        assert (obj.name, obj.size, obj.crc32c) == (NAME, len(DATA), crc32c_b64(DATA))
        assert obj.metadata["obsingest-readout-time"] == "2026-11-22T01:02:03+00:00"
        assert obj.bucket == store.bucket
        assert obj.time_created.tzinfo is not None
        assert store.uri(NAME).endswith(NAME)

    def test_read_head_gives_the_first_bytes_and_the_whole_objects_version(self, store: ObjectStore) -> None:
        put = store.put(NAME, DATA).obj
        head = store.read_head(NAME, 100)
        assert head.data == DATA[:100]
        assert (head.generation, head.crc32c) == (put.generation, crc32c_b64(DATA))
        assert store.read_head(NAME, len(DATA) + 5000).data == DATA  # longer than the object

    def test_missing_objects_are_object_missing_on_stat_and_read(self, store: ObjectStore) -> None:
        for call in (store.stat, store.read, lambda name: store.read_head(name, 10)):
            with pytest.raises(ObjectMissing) as info:
                call("raw/nothing/here.fits.fz")
            assert not info.value.retriable and "raw/nothing/here.fits.fz" in str(info.value)

    def test_concurrent_writers_of_one_name_store_it_once(self, store: ObjectStore) -> None:
        barrier = threading.Barrier(6)

        def put(_: int) -> bool:
            barrier.wait(timeout=30)
            return store.put(NAME, DATA).created

        with ThreadPoolExecutor(6) as pool:
            created = list(pool.map(put, range(6)))
        assert created.count(True) == 1
        assert store.read(NAME) == DATA

    def test_delete_removes_an_object_and_a_missing_one_is_no_error(self, store: ObjectStore) -> None:
        """The canary watch deletes its objects; one a crashed predecessor deleted is no error."""
        store.put(NAME, DATA)
        for _ in range(2):
            store.delete(NAME)  # type: ignore[attr-defined]  # not every store deletes
        with pytest.raises(ObjectMissing):
            store.stat(NAME)
