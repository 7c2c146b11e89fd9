"""Group commit of the Butler backend: concurrent registrations share Butler transactions, every
caller gets its own outcome, a failure reaches exactly the callers of its batch. The Butler side
is replaced by a recorder (the logic under test is the batching; the real Butler is exercised by
tests/integration/test_butler_*.py)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import select

from obsingest.dataid import DataId, dataset_id
from obsingest.errors import ChecksumConflict
from obsingest.registry import FileRecord
from obsingest.registry.butler import ButlerRegistry
from obsingest.registry.butler_repo import ButlerSettings
from obsingest.registry.engine import make_engine
from obsingest.registry.facility_tables import arrival_outbox
from obsingest.registry.migrations import migrate
from obsingest.registry.outbox import OutboxMessage
from obsingest.registry.registry import Registry, RegistryUnavailable
from obsingest.settings import RegistrySettings, run_name

pytestmark = pytest.mark.unit


class Recorder:
    def __init__(self, seconds: float = 0.05, fail_exposure: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.seconds = seconds
        self.fail_exposure = fail_exposure
        self.lock = threading.Lock()

    def __call__(self, ok):
        with self.lock:
            self.batches.append([p.record.data_id.detector for p, _ in ok])
        time.sleep(self.seconds)
        if self.fail_exposure and any(p.exposure.exposure == self.fail_exposure for p, _ in ok):
            raise OSError("datastore unreachable")
        return {}


@pytest.fixture
def registry(tmp_path, monkeypatch):
    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'companion.sqlite3'}")
    engine = make_engine(settings)
    migrate(engine)
    reg = ButlerRegistry(engine, settings, ButlerSettings(), butler=None, repo="test")
    yield reg
    reg.engine.dispose()


def _record(det: int, exposure: int = 2026112200001, checksum: str = "crc32c:00000001"):
    did = DataId("LSSTCam", exposure, det)
    return FileRecord(did, f"file:///s/{did.object_name()}", 10, checksum)


def test_concurrent_registrations_share_transactions_and_each_gets_its_own(registry):
    recorder = Recorder()
    registry._in_butler = recorder
    with ThreadPoolExecutor(64) as pool:
        results = list(pool.map(lambda d: registry.register(_record(d)), range(205)))
    assert sorted(r.dataset_id for r in results) == sorted({r.dataset_id for r in results})
    assert all(r.created for r in results)
    assert sorted(d for b in recorder.batches for d in b) == list(range(205))
    assert len(recorder.batches) < 205 / 4  # batched, not one transaction per file
    assert registry.batch_stats()["largest_batch"] > 1


def test_a_lone_caller_is_ingested_at_once(registry):
    """A lone caller is not held for the gathering window: with a 30 s window it returns in a
    fraction of it (no tight wall-clock figure: the first call's own set-up varies by machine)."""
    registry._in_butler = Recorder(seconds=0.0)
    registry._batches.gather = 30.0
    started = time.perf_counter()
    assert registry.register(_record(3)).created
    assert time.perf_counter() - started < 15.0
    again = registry.register(_record(3))
    assert not again.created  # redelivery: the same dataset, no new row


def test_a_companion_conflict_fails_only_its_caller(registry):
    registry._in_butler = Recorder(seconds=0.0)
    registry.register(_record(7))
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(registry.register, _record(d)) for d in range(8)]
        futures.append(pool.submit(registry.register, _record(7, checksum="crc32c:00000002")))
        outcomes = [f.exception() or f.result() for f in futures]
    assert isinstance(outcomes[-1], ChecksumConflict)
    assert not any(isinstance(o, Exception) for o in outcomes[:-1])


def test_a_butler_failure_is_retriable_and_reaches_only_its_batch(registry):
    registry._in_butler = Recorder(seconds=0.0, fail_exposure=2026112200002)
    assert registry.register(_record(1, 2026112200001)).created
    with pytest.raises(RegistryUnavailable, match="datastore unreachable"):
        registry.register(_record(1, 2026112200002))
    # the Butler first: the companion recorded nothing, so nothing claims the CCD registered;
    # the redelivery after the Butler is back is its first registration (announced)
    assert _companion_exposures(registry) == [2026112200001]
    registry._in_butler = Recorder(seconds=0.0)
    assert registry.register(_record(1, 2026112200002)).created is True


def _companion_exposures(registry):
    from obsingest.registry import tables

    with registry.engine.connect() as conn:
        return sorted(conn.execute(select(tables.dataset.c.exposure)).scalars())


def test_a_companion_failure_after_the_butler_is_retriable_and_its_redelivery_announces(
    registry, monkeypatch
):
    """The Butler has committed, the companion's transaction fails: the caller fails (retriable),
    nothing claims the CCD; its redelivery records and announces it once."""
    recorder = Recorder(seconds=0.0)
    registry._in_butler = recorder
    real = registry._in_tx
    calls = {"n": 0}

    def failing(fn):
        calls["n"] += 1
        from sqlalchemy.exc import OperationalError

        raise OperationalError("COMMIT", None, ConnectionError("companion unreachable"))

    monkeypatch.setattr(registry, "_in_tx", failing)
    monkeypatch.setattr(registry.settings, "retry_attempts", 1)
    with pytest.raises(RegistryUnavailable, match="companion unreachable"):
        registry.register(_record(2), announce=_announce)
    assert recorder.batches == [[2]] and calls["n"] >= 1
    assert _companion_exposures(registry) == [] and _outbox(registry) == {}
    monkeypatch.setattr(registry, "_in_tx", real)
    again = registry.register(_record(2), announce=_announce)
    assert again.created and again.outbox_id == _outbox(registry)[again.dataset_id]
    assert recorder.batches == [[2], [2]]
    assert not registry.register(_record(2), announce=_announce).created


def _announce(registration):
    return OutboxMessage("arrivals", str(registration.dataset_id).encode())


def _outbox(registry):
    with registry.engine.connect() as conn:
        return {r.dataset_id: r.id for r in conn.execute(select(arrival_outbox))}


def test_outbox_rows_of_a_batch_are_written_after_the_butler_each_to_its_caller(registry):
    recorder = Recorder(seconds=0.02)
    registry._in_butler = recorder
    with ThreadPoolExecutor(64) as pool:
        results = list(pool.map(lambda d: registry.register(_record(d), announce=_announce), range(205)))
    rows = _outbox(registry)
    assert len(rows) == 205
    assert all(r.outbox_id == rows[r.dataset_id] for r in results)
    # a redelivery writes no second row and gets none
    again = registry.register(_record(5), announce=_announce)
    assert not again.created and again.outbox_id is None and len(_outbox(registry)) == 205


def test_no_outbox_row_for_a_dataset_the_butler_refused(registry):
    registry._in_butler = Recorder(seconds=0.0, fail_exposure=2026112200002)
    with pytest.raises(RegistryUnavailable):
        registry.register(_record(1, 2026112200002), announce=_announce)
    assert _outbox(registry) == {}


def test_a_message_that_cannot_be_built_fails_only_its_caller(registry):
    registry._in_butler = Recorder(seconds=0.02)
    settings = registry.settings
    bad = dataset_id(_record(3).data_id, settings.dataset_type, run_name(settings.run, "LSSTCam"))

    def announce(registration):
        if registration.dataset_id == bad:
            raise ValueError("cannot encode")
        return _announce(registration)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(registry.register, _record(d), None, announce) for d in range(8)]
        outcomes = [f.exception() or f.result() for f in futures]
    assert isinstance(outcomes[3], ValueError)
    assert not any(isinstance(o, Exception) for i, o in enumerate(outcomes) if i != 3)
    assert len(_outbox(registry)) == 7 and bad not in _outbox(registry)


def test_an_exposure_prepared_concurrently_is_one_batch(tmp_path):
    """205 handlers reading and checking their CCD (``arriving``) at once: the batch waits for
    them all and stops as soon as it holds every detector (no gap to wait out)."""
    settings = RegistrySettings(url=f"sqlite:///{tmp_path / 'companion.sqlite3'}")
    engine = make_engine(settings)
    migrate(engine)
    butler_settings = ButlerSettings(gather=60.0, gather_gap=60.0)
    registry = ButlerRegistry(engine, settings, butler_settings, butler=None, repo="test")
    recorder = Recorder(seconds=0.0)
    registry._in_butler = recorder
    everyone_preparing = threading.Barrier(205)

    def handler(det: int):
        with registry.arriving():
            everyone_preparing.wait(60)
            return registry.register(_record(det))

    try:
        with ThreadPoolExecutor(205) as pool:
            results = list(pool.map(handler, range(205)))
    finally:
        engine.dispose()
    assert all(r.created for r in results)
    assert [sorted(b) for b in recorder.batches] == [list(range(205))]


class RacingWriter(Recorder):
    """The Butler step, during which another writer records ``detector`` in the companion
    (after the batch's check found it new, before its companion step)."""

    def __init__(self, registry, detector: int, checksum: str) -> None:
        super().__init__(seconds=0.0)
        self.other = Registry(registry.engine, registry.settings)
        self.detector, self.checksum = detector, checksum

    def __call__(self, ok):
        self.other.register(_record(self.detector, checksum=self.checksum), announce=_announce)
        return super().__call__(ok)


@pytest.mark.parametrize("same_bytes", [True, False])
def test_a_dataset_another_writer_recorded_mid_batch_is_a_duplicate_or_a_conflict(registry, same_bytes):
    checksum = "crc32c:00000001" if same_bytes else "crc32c:0000ffff"
    registry._in_butler = RacingWriter(registry, 2, checksum)
    commit = registry._batches
    # this thread "prepares" too: the batch waits (at most ``gather``) until all four queued
    with commit.arriving(), ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(registry.register, _record(d), None, _announce) for d in range(4)]
        time.sleep(0.2)
    outcomes = [f.exception() or f.result() for f in futures]
    if same_bytes:
        assert not outcomes[2].created and outcomes[2].outbox_id is None
    else:
        assert isinstance(outcomes[2], ChecksumConflict)
    others = [o for i, o in enumerate(outcomes) if i != 2]
    assert all(o.created and o.outbox_id is not None for o in others)
    assert len(_outbox(registry)) == 4  # three from the batch, one from the other writer


def test_the_same_ccd_twice_in_one_batch_is_recorded_once(registry):
    registry._in_butler = Recorder(seconds=0.0)
    commit = registry._batches
    with commit.arriving(), ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(registry.register, _record(d), None, _announce) for d in (7, 7, 8)]
        time.sleep(0.2)
    outcomes = [f.result() for f in futures]
    assert sorted(o.created for o in outcomes) == [False, True, True]
    assert len(_outbox(registry)) == 2


def test_a_butler_database_down_at_start_is_an_outage_not_a_bug(tmp_path, monkeypatch):
    """Opening the Butler raised the driver's OperationalError as it was: a function started
    during a registry outage answered every delivery 500 (a bug), not 503 with Retry-After."""
    pytest.importorskip("lsst.daf.butler")
    from sqlalchemy.exc import OperationalError

    from obsingest.registry import butler

    def down(*args, **kwargs):
        raise OperationalError("connect", None, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(butler, "open_butler", down)
    monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", f"sqlite:///{tmp_path / 'companion.sqlite3'}")
    with pytest.raises(RegistryUnavailable, match="connection refused"):
        ButlerRegistry.open(RegistrySettings(url=f"butler:{tmp_path / 'repo'}"))


def test_a_batch_failing_on_one_exposure_still_ingests_the_others(registry):
    """An error the Butler raises for one exposure's records or files (any exception, not only a
    refusal) failed every CCD of the batch, other exposures' too, at each of their redeliveries
    while they kept sharing batches with it. Its exposure alone fails now; the others go in."""
    from obsingest.registry.butler import _Pending
    from obsingest.registry.registry import ExposureRecord

    recorder = Recorder(seconds=0.0, fail_exposure=2026112200002)
    registry._in_butler = recorder
    batch = []
    for exposure in (2026112200001, 2026112200002):
        for det in range(3):
            record = _record(det, exposure)
            batch.append(_Pending(record, ExposureRecord("LSSTCam", exposure, 20261122)))
    registry._flush(batch)
    good, bad = batch[:3], batch[3:]
    assert all(p.result is not None and p.result.created and p.error is None for p in good)
    assert all(isinstance(p.error, RegistryUnavailable) for p in bad)
    assert _companion_exposures(registry) == [2026112200001] * 3


@pytest.mark.parametrize("wrapped", [False, True], ids=["driver-error", "setup-gave-up"])
def test_a_butler_database_outage_fails_a_batch_once_not_once_per_exposure(registry, wrapped):
    """The Butler's database unreachable is the same for every exposure: a batch of several
    exposures failing so is not tried again exposure by exposure (each try waits for the
    set-up's retries, ~10 s: a flush of k exposures held its callers, and every batch queued
    behind it, k + 1 times as long through an outage, when redeliveries mix many exposures)."""
    from sqlalchemy.exc import OperationalError

    from obsingest.registry.butler import _Pending
    from obsingest.registry.registry import ExposureRecord
    from obsingest.retry import RetriesExhausted

    calls = []

    def down(ok):
        calls.append(len(ok))
        error = OperationalError("connect", {}, ConnectionRefusedError("connection refused"))
        raise RetriesExhausted("butler set-up gave up", "butler-setup", 6, error) if wrapped else error

    registry._in_butler = down
    batch = []
    for exposure in (2026112200001, 2026112200002, 2026112200003):
        batch += [
            _Pending(_record(det, exposure), ExposureRecord("LSSTCam", exposure, 20261122)) for det in (1, 2)
        ]
    registry._flush(batch)
    assert calls == [6]
    assert all(p.result is None and p.error is not None and p.error.retriable for p in batch)
    assert _companion_exposures(registry) == []


def test_companion_rows_gone_under_a_process_that_wrote_them_are_written_again(registry):
    """The Butler backend's companion skips the run and exposure rows this process committed,
    as the SQL registry does; a companion restored from a backup taken before them refused every
    later CCD of the run (a foreign key) as unstorable input: quarantined although the Butler
    held it, until the process restarted. The rows are written again, as the SQL registry does."""
    from sqlalchemy import delete

    from obsingest.registry import tables

    registry._in_butler = Recorder(seconds=0.0)
    assert registry.register(_record(1)).created
    with registry.engine.begin() as conn:  # the restore: nothing of the run or exposure is left
        for table in (arrival_outbox, tables.datastore_record, tables.dataset, tables.exposure, tables.run):
            conn.execute(delete(table))
    assert registry.register(_record(2)).created
    assert _companion_exposures(registry) == [2026112200001]
    assert registry.exposure("LSSTCam", 2026112200001) is not None
