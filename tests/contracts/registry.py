"""The ``Registry`` contract (obsingest/registry): idempotent registration, conflicts refused
without overwriting, exactly one row under concurrent duplicates, exposure records filled but
never overwritten, quarantine repeats counted once. Subclasses provide ``registry``."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from obsingest.dataid import DataId, dataset_id
from obsingest.errors import ChecksumConflict
from obsingest.registry import ExposureRecord, FileRecord, QuarantineEntry, Registry

DID = DataId("LSSTComCam", 2026112200001, 4)


def file_record(checksum: str = "crc32c:0000abcd", uri: str = "file:///a", size: int = 100):
    return FileRecord(DID, uri, size, checksum, readout_time=datetime(2026, 11, 22, tzinfo=UTC))


class RegistryContract:
    """Provide a fixture ``registry`` returning an empty, migrated registry."""

    def test_register_then_redeliver_is_a_noop_returning_the_same_dataset(self, registry: Registry) -> None:
        first = registry.register(file_record())
        second = registry.register(file_record(uri="file:///elsewhere"))
        assert first.created and not second.created
        assert first.dataset_id == second.dataset_id == dataset_id(DID, "raw", "LSSTComCam/raw/all")
        assert second.uri == "file:///a"
        assert second.registered_time == first.registered_time
        assert registry.count_datasets() == 1
        [row] = registry.datasets()
        assert row["id"] == str(first.dataset_id)
        assert (row["instrument"], row["exposure"], row["detector"]) == ("LSSTComCam", DID.exposure, 4)
        assert (row["checksum"], row["size"]) == ("crc32c:0000abcd", 100)

    def test_same_data_id_different_bytes_is_a_conflict_and_nothing_is_overwritten(
        self, registry: Registry
    ) -> None:
        registry.register(file_record())
        with pytest.raises(ChecksumConflict, match="refusing file:///b"):
            registry.register(file_record(checksum="crc32c:00000bad", uri="file:///b"))
        [row] = registry.datasets()
        assert row["checksum"] == "crc32c:0000abcd" and row["uri"] == "file:///a"

    def test_concurrent_duplicate_registrations_give_exactly_one_row(self, registry: Registry) -> None:
        barrier = threading.Barrier(8)

        def go(_: int):
            barrier.wait(timeout=30)
            return registry.register(file_record())

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(go, range(8)))
        assert sum(r.created for r in results) == 1
        assert len({r.dataset_id for r in results}) == 1
        assert registry.count_datasets() == 1

    def test_exposure_upsert_fills_unknown_fields_only(self, registry: Registry) -> None:
        registry.register(file_record())  # creates the exposure with only its id
        registry.upsert_exposure(ExposureRecord("LSSTComCam", DID.exposure, DID.day_obs, None, 15.0, "r"))
        registry.upsert_exposure(ExposureRecord("LSSTComCam", DID.exposure, DID.day_obs, None, 99.0, "g"))
        exposure = registry.exposure("LSSTComCam", DID.exposure)
        assert exposure is not None
        assert (exposure["exposure_time"], exposure["physical_filter"]) == (15.0, "r")

    def test_quarantine_counts_repeats_once(self, registry: Registry) -> None:
        entry = QuarantineEntry("file:///bad", "corrupt-file", "truncated", "crc32c:1", DID, 5)
        registry.quarantine(entry)
        registry.quarantine(entry)
        registry.quarantine(QuarantineEntry("file:///bad", "header-mismatch", "other", "crc32c:1"))
        rows = registry.quarantined()
        assert [(r["reason"], r["occurrences"]) for r in rows] == [
            ("corrupt-file", 2),
            ("header-mismatch", 1),
        ]
        assert rows[0]["detector"] == 4
