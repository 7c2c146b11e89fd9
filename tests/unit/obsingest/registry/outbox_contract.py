"""The arrivals outbox and canary log on a registry backend: run on SQLite by the unit tests and
on PostgreSQL by ``tests/integration/test_outbox_postgres.py``. A subclass provides ``registry``."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from obsingest.dataid import DataId
from obsingest.registry import FileRecord, OutboxMessage, Registration, Registry

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def file_record(detector: int, uri: str | None = None) -> FileRecord:
    data_id = DataId("LSSTComCam", 2026112200001, detector)
    return FileRecord(
        data_id,
        uri or f"gs://b/raw/{detector}",
        100,
        f"crc32c:{detector:08x}",
        readout_time=T0,
        stored_time=T0,
    )


def announce(registration: Registration) -> OutboxMessage:
    return OutboxMessage(
        "ccd-arrivals",
        f"event {registration.dataset_id}".encode(),
        key="LSSTComCam/2026112200001",
        attributes={"dataset_id": str(registration.dataset_id)},
    )


class OutboxContract:
    registry: Any  # the subclass's pytest fixture: the Registry under test

    def register(self, registry: Registry, detector: int) -> Registration:
        return registry.register(file_record(detector), announce=announce)

    def test_a_new_dataset_and_its_announcement_commit_together(self, registry):
        first = self.register(registry, 1)
        assert first.created and first.outbox_id is not None
        row = registry.outbox.row(first.dataset_id)
        assert row["payload"] == f"event {first.dataset_id}".encode()
        assert row["published_at"] is None and row["lease_until"] is not None
        again = self.register(registry, 1)  # a redelivery: no second row
        assert not again.created and again.outbox_id is None
        assert registry.outbox.status().pending == 1

    def test_no_dataset_no_row_when_the_registration_fails(self, registry):
        self.register(registry, 2)
        conflicting = FileRecord(file_record(2).data_id, "gs://b/other", 7, "crc32c:ffffffff")
        try:
            registry.register(conflicting, announce=announce)
        except Exception as exc:
            assert exc.reason == "checksum-conflict"
        assert registry.outbox.status().pending == 1

    def test_claims_are_leases_and_nothing_is_claimed_twice(self, registry):
        ids = [self.register(registry, d).dataset_id for d in range(3, 8)]
        # the registering process holds each new row for its immediate publish
        assert registry.outbox.claim(limit=10) == []
        later = datetime.now(UTC) + timedelta(minutes=1)
        claimed = registry.outbox.claim(limit=3, now=later)
        assert [r.dataset_id for r in claimed] == ids[:3]
        assert claimed[0].message.attributes == {"dataset_id": str(ids[0])}
        assert claimed[0].message.key == "LSSTComCam/2026112200001"
        rest = registry.outbox.claim(limit=10, now=later)
        assert [r.dataset_id for r in rest] == ids[3:]
        assert registry.outbox.claim(limit=10, now=later) == []
        registry.outbox.mark_published([r.id for r in claimed])
        status = registry.outbox.status()
        assert (status.pending, status.published) == (2, 3)
        # a lease that expired (its publisher died) is taken again
        much_later = later + timedelta(minutes=5)
        assert [r.dataset_id for r in registry.outbox.claim(now=much_later)] == ids[3:]

    def test_concurrent_drains_split_the_rows_between_them(self, registry):
        for detector in range(8):
            self.register(registry, detector)
        later = datetime.now(UTC) + timedelta(minutes=1)
        got: list[list[int]] = []
        lock = threading.Lock()

        def drain() -> None:
            mine = []
            while batch := registry.outbox.claim(limit=2, now=later):
                mine += [r.id for r in batch]
            with lock:
                got.append(mine)

        threads = [threading.Thread(target=drain) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        every = [row_id for mine in got for row_id in mine]
        assert len(every) == len(set(every)) == 8

    def test_failure_release_and_claim_of_one_dataset(self, registry):
        reg = self.register(registry, 4)
        assert registry.outbox.claim_dataset(reg.dataset_id) is None  # still leased
        registry.outbox.mark_failed(reg.outbox_id, "publish-failed: 404 topic", retry_after=0)
        row = registry.outbox.row(reg.dataset_id)
        assert row["attempts"] == 1 and row["last_error"] == "publish-failed: 404 topic"
        claimed = registry.outbox.claim_dataset(reg.dataset_id)
        assert claimed is not None and claimed.id == reg.outbox_id
        registry.outbox.release([claimed.id], retry_after=0)
        registry.outbox.mark_published([claimed.id])
        assert registry.outbox.claim_dataset(reg.dataset_id) is None
        assert registry.outbox.claim_dataset(uuid.uuid4()) is None

    def test_published_rows_are_purged_after_the_retention(self, registry):
        regs = [self.register(registry, d) for d in range(2)]
        registry.outbox.mark_published([regs[0].outbox_id], at=T0)
        assert registry.outbox.purge(timedelta(days=7), now=T0 + timedelta(days=6)) == 0
        assert registry.outbox.purge(timedelta(days=7), now=T0 + timedelta(days=8)) == 1
        status = registry.outbox.status()
        assert (status.pending, status.published) == (1, 0)  # the pending row is never purged

    def test_one_purge_deletes_every_row_past_the_retention_in_batches(self, registry):
        """The facility purges once an hour: a night's 190,000 rows must go in one call, not
        ``batch`` of them (1,000 an hour is a quarter of a night a day: the table grew forever)."""
        regs = [self.register(registry, d) for d in range(5)]
        registry.outbox.mark_published([r.outbox_id for r in regs], at=T0)
        assert registry.outbox.purge(timedelta(days=7), batch=2, now=T0 + timedelta(days=8)) == 5
        assert registry.outbox.status().published == 0

    def test_canary_log(self, registry):
        audit = registry.audit
        audit.canary_written("canary/a", T0)
        audit.canary_seen("canary/a", T0 + timedelta(seconds=2))
        audit.canary_seen("canary/a", T0 + timedelta(seconds=9))  # redelivery: first one wins
        audit.canary_written("canary/b", T0 + timedelta(seconds=30))
        audit.canary_seen("canary/elsewhere", T0)  # a sighting of a canary nobody logged
        rows = {r.name: r for r in audit.canaries(since=T0 - timedelta(hours=1))}
        assert rows["canary/a"].seen_at == T0 + timedelta(seconds=2)
        assert rows["canary/b"].seen_at is None and "canary/elsewhere" not in rows
        assert audit.purge_canaries(timedelta(days=1), now=T0 + timedelta(days=2)) == 3

    def test_reconcile_lookups(self, registry):
        self.register(registry, 5)
        audit = registry.audit
        assert audit.registered_uris(["gs://b/raw/5", "gs://b/raw/6"]) == {"gs://b/raw/5"}
        rows = audit.stored_between(T0, T0 + timedelta(seconds=1), uri_prefix="gs://b/")
        assert [r["uri"] for r in rows] == ["gs://b/raw/5"]
        assert audit.stored_between(T0, T0 + timedelta(seconds=1), uri_prefix="gs://c/") == []
        assert audit.quarantined_uris(["gs://b/raw/6"]) == set()
