"""The backfill dispatch loop, pipelined: every batch is journalled ``sent`` before any worker
holds it, a file is ``acked`` only after its result, each worker gets its next batch the moment
it reports, transient failures come back for a retry round. A fake pool stands in for the
worker processes (pure logic; the real pool and store are in tests/integration/test_backfill.py).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from producers.backfill.run import BackfillConfig, BackfillReport, _Run
from producers.backfill.transfer import FileResult
from producers.edge.journal import Entry, Journal

pytestmark = pytest.mark.unit


class FakePool:
    """``size`` workers answering each batch on another thread, as the collector would."""

    def __init__(self, size: int, journal: Journal, fail: set[str]) -> None:
        self.size = size
        self.journal = journal
        self.fail = fail
        self.run: _Run | None = None
        self.busy = 0
        self.lock = threading.Lock()
        self.handed: list[list[str]] = []
        self.states_at_submit: list[str] = []
        self.threads: list[threading.Thread] = []
        self.max_busy = 0

    def idle(self) -> int:
        with self.lock:
            return self.size - self.busy

    def submit(self, keys: list[str], payload: list[tuple[str, str]]) -> bool:
        with self.lock:
            if self.busy >= self.size:
                return False
            self.busy += 1
            self.max_busy = max(self.max_busy, self.busy)
        self.handed.append(keys)
        self.states_at_submit += [self.journal.get(k).state for k in keys]  # type: ignore[union-attr]
        thread = threading.Thread(target=self._answer, args=(keys,))
        self.threads.append(thread)
        thread.start()
        return True

    def _answer(self, keys: list[str]) -> None:
        results = [
            FileResult(k, False, retriable=True, reason="http-503", error="busy")
            if k in self.fail
            else FileResult(k, True, "stored", 10, "crc32c:00000000")
            for k in keys
        ]
        with self.lock:
            self.busy -= 1
        assert self.run is not None
        self.run.on_result(keys, True, results)


@pytest.mark.parametrize("workers", [1, 3])
def test_every_batch_is_journalled_sent_before_a_worker_holds_it(tmp_path: Path, workers: int) -> None:
    journal = Journal(tmp_path, name="backfill.sqlite3")
    try:
        journal.add_many(Entry(key=f"k{i:03d}", source=f"/src/{i}", size=10) for i in range(50))
        todo = journal.pending()
        report = BackfillReport(files=50)
        run = _Run(BackfillConfig(["x"], "gs://b", tmp_path, workers, batch=4), journal, report, None)
        pool = FakePool(workers, journal, fail={"k007", "k031"})
        run.pool = pool  # type: ignore[assignment]
        pool.run = run
        retry = run.run_round(pool, todo)  # type: ignore[arg-type]
        for thread in pool.threads:
            thread.join()

        assert set(pool.states_at_submit) == {"sent"}
        assert sorted(k for batch in pool.handed for k in batch) == [e.key for e in todo]
        assert pool.max_busy <= workers
        assert sorted(e.key for e in retry) == ["k007", "k031"]
        assert report.stored == 48 and set(report.failed) == {"k007", "k031"}
        counts = journal.counts()
        assert counts["acked"] == 48 and counts["sent"] == 2
        assert journal.get("k007").reason == "http-503"  # type: ignore[union-attr]
        assert {e.attempts for e in journal.items()} == {1}

        # the retry round: the transient ones succeed now and are acked
        pool.fail.clear()
        assert run.run_round(pool, retry) == []  # type: ignore[arg-type]
        for thread in pool.threads:
            thread.join()
        assert journal.counts()["acked"] == 50 and report.failed == {}
    finally:
        journal.close()


def test_a_result_for_a_crashed_worker_comes_back_for_a_retry(tmp_path: Path) -> None:
    journal = Journal(tmp_path, name="backfill.sqlite3")
    try:
        journal.add_many(Entry(key=f"k{i}", source=f"/src/{i}") for i in range(3))
        todo = journal.pending()
        report = BackfillReport(files=3)
        run = _Run(BackfillConfig(["x"], "gs://b", tmp_path, 1, batch=3), journal, report, None)

        class CrashingPool:
            size = 1

            def __init__(self) -> None:
                self.held: list[Any] = []

            def idle(self) -> int:
                return 0 if self.held else 1

            def submit(self, keys: list[str], payload: Any) -> bool:
                self.held.append(keys)
                threading.Timer(0.01, self.crash, args=(keys,)).start()
                return True

            def crash(self, keys: list[str]) -> None:
                self.held.clear()
                run.on_result(keys, False, RuntimeError("worker pid 1 died (killed by SIGBUS)"))

        pool = CrashingPool()
        run.pool = pool  # type: ignore[assignment]
        retry = run.run_round(pool, todo)  # type: ignore[arg-type]
        assert [e.key for e in retry] == ["k0", "k1", "k2"]
        assert journal.counts()["sent"] == 3 and journal.counts()["acked"] == 0
        assert "RuntimeError" in report.failed["k0"]
    finally:
        journal.close()


def test_a_rerun_retries_the_files_a_permanent_failure_stopped(tmp_path: Path) -> None:
    """A file refused for a reason outside itself (another object under its name, a permission,
    a missing bucket) is fixed outside the backfill; the rerun must send it, not count it as
    already done and exit 0 with it missing from the store. A file that is still bad fails again
    with its reason."""
    from obsingest.dataid import DataId
    from obsingest.errors import ObjectMissing
    from obsingest.store.local import LocalDirStore
    from producers.backfill.run import run_backfill
    from tests.fixtures.camera_files import ccd_file

    archive = tmp_path / "archive"
    archive.mkdir()
    data_id = DataId("LSSTCam", 2025041500060, 1)
    (archive / "good.fits").write_bytes(ccd_file(data_id))
    (archive / "junk.fits").write_bytes(b"not a FITS file")
    store = LocalDirStore(tmp_path / "store", notify=False)
    name = data_id.object_name(prefix="")
    store.put(name, b"other bytes, stale")  # in the way: the first run's put is refused
    config = BackfillConfig(
        [str(archive)], f"file://{tmp_path / 'store'}", tmp_path / "spool", 1, progress=False
    )

    first = run_backfill(config)
    assert set(first.failed) == {"good.fits", "junk.fits"}

    store.delete(name)  # the operator removes the stale object
    with pytest.raises(ObjectMissing):
        store.stat(name)
    second = run_backfill(config)
    assert second.stored == 1, second.table()
    assert store.stat(name).size == (archive / "good.fits").stat().st_size
    assert set(second.failed) == {"junk.fits"} and second.failed["junk.fits"].startswith("corrupt-file")


class PoisonPool(FakePool):
    """A worker dies on any batch holding a poison file (out of memory on it, say)."""

    def __init__(self, size: int, journal: Journal, poison: set[str]) -> None:
        super().__init__(size, journal, fail=set())
        self.poison = poison

    def _answer(self, keys: list[str]) -> None:
        if not self.poison & set(keys):
            super()._answer(keys)
            return
        with self.lock:
            self.busy -= 1
        assert self.run is not None
        self.run.on_result(keys, False, RuntimeError("worker pid 1 died (killed by SIGKILL)"))


def test_a_file_that_kills_its_worker_does_not_hold_back_its_batch(tmp_path: Path) -> None:
    """Every retry round batches the same files together again: one that kills its worker failed
    its batch-mates in every round and every rerun, good files never sent."""
    journal = Journal(tmp_path, name="backfill.sqlite3")
    try:
        journal.add_many(Entry(key=f"k{i}", source=f"/src/{i}", size=10) for i in range(8))
        todo = journal.pending()
        report = BackfillReport(files=8)
        run = _Run(BackfillConfig(["x"], "gs://b", tmp_path, 1, batch=4), journal, report, None)
        pool = PoisonPool(1, journal, poison={"k2"})
        run.pool = pool  # type: ignore[assignment]
        pool.run = run
        retry = run.run_round(pool, todo)  # type: ignore[arg-type]
        for thread in pool.threads:
            thread.join()
        assert [e.key for e in retry] == ["k2"]
        assert set(report.failed) == {"k2"} and "SIGKILL" in report.failed["k2"]
        assert journal.counts()["acked"] == 7
    finally:
        journal.close()
