"""The worker pool: a worker killed by a signal (SIGBUS, as a truncated memory map does) fails
its own job with WorkerCrashed and is replaced; the other workers and jobs never notice. Nothing
a worker sends and no failed replacement stops the pool's result collector."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from itertools import pairwise

import pytest

from obsingest.errors import CorruptFile
from obsingest.retry import RetriesExhausted
from producers.edge.errors import UnexpectedError, WorkerCrashed
from producers.edge.worker import RESPAWN_BACKOFF, WorkerInit, WorkerPool

pytestmark = pytest.mark.unit


class TwoArgError(Exception):
    """Pickles (its args are the message alone) but does not unpickle: ``cls(msg)`` lacks ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code


class Handler:
    """Test handler: echo, raise or die, as the payload says."""

    def __call__(self, payload: str) -> str:
        if payload == "sigbus":
            os.kill(os.getpid(), signal.SIGBUS)
            time.sleep(5)
        if payload == "corrupt":
            raise CorruptFile("/daq/x.fits: truncated")
        if payload == "exhausted":
            raise RetriesExhausted("gcs put: gave up", "connection", 6, ConnectionResetError())
        if payload == "plain":
            raise KeyError("a bug")
        if payload == "unpicklable":
            error = ValueError("holds a lock")
            error.lock = threading.Lock()  # type: ignore[attr-defined]
            raise error
        if payload == "two-arg":
            raise TwoArgError("reset by peer", 104)
        if payload == "two-arg-result":  # a result, not an error: sent as it is
            return TwoArgError("reset by peer", 104)  # type: ignore[return-value]
        return f"{payload}@{os.getpid()}"


class Results:
    def __init__(self) -> None:
        self.items: dict[object, tuple[bool, object]] = {}
        self.cond = threading.Condition()

    def __call__(self, job: object, ok: bool, value: object) -> None:
        with self.cond:
            self.items[job] = (ok, value)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 60) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, timeout), self.items


def run_jobs(pool: WorkerPool, jobs: list[tuple[int, str]]) -> None:
    pending = list(jobs)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        if pool.submit(*pending[0]):
            pending.pop(0)
        else:
            time.sleep(0.01)
    assert not pending


@pytest.fixture
def pool_and_results():
    results = Results()
    pool = WorkerPool(2, WorkerInit(f"{__name__}:Handler"), results, name="test")
    pool.start(timeout=60)
    yield pool, results
    pool.stop(timeout=10)


def test_a_worker_killed_by_sigbus_fails_only_its_own_job(pool_and_results) -> None:
    pool, results = pool_and_results
    before = set(pool.pids())
    run_jobs(pool, [(1, "a"), (2, "sigbus"), (3, "b"), (4, "c"), (5, "d")])
    results.wait(5)
    ok, error = results.items[2]
    assert not ok and isinstance(error, WorkerCrashed)
    assert "SIGBUS" in str(error) and error.reason == "worker-crashed"
    assert all(results.items[j][0] for j in (1, 3, 4, 5))
    assert pool.stats.crashes == 1 and pool.stats.signals == {"killed by SIGBUS": 1}
    # the dead worker was replaced: the pool is whole again and takes more work
    deadline = time.monotonic() + 60
    while pool.idle() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.idle() == 2 and set(pool.pids()) != before
    run_jobs(pool, [(6, "e")])
    results.wait(6)
    assert results.items[6][0]


def test_errors_cross_the_process_boundary_intact(pool_and_results) -> None:
    pool, results = pool_and_results
    run_jobs(pool, [(1, "corrupt"), (2, "exhausted"), (3, "plain"), (4, "unpicklable")])
    results.wait(4)
    corrupt = results.items[1][1]
    assert isinstance(corrupt, CorruptFile) and "truncated" in str(corrupt)
    exhausted = results.items[2][1]
    assert isinstance(exhausted, RetriesExhausted)
    assert (exhausted.kind, exhausted.attempts) == ("connection", 6)
    assert isinstance(results.items[3][1], KeyError)
    stand_in = results.items[4][1]
    assert isinstance(stand_in, UnexpectedError) and "holds a lock" in str(stand_in)
    pickle.dumps(stand_in)


def test_forked_workers_are_replaced_by_spawned_ones() -> None:
    results = Results()
    pool = WorkerPool(
        1,
        WorkerInit(f"{__name__}:Handler"),
        results,
        name="test",
        start_method="fork",
        respawn_method="spawn",
    )
    pool.start(timeout=60)
    try:
        run_jobs(pool, [(1, "sigbus")])
        results.wait(1)
        assert isinstance(results.items[1][1], WorkerCrashed)
        run_jobs(pool, [(2, "after")])
        results.wait(2)
        assert results.items[2][0] and pool.stats.restarts == 1
    finally:
        pool.stop(timeout=10)


def wait_until(condition: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_an_error_that_does_not_unpickle_is_sent_as_a_stand_in(pool_and_results) -> None:
    pool, results = pool_and_results
    run_jobs(pool, [(1, "two-arg")])
    results.wait(1, timeout=10)
    ok, stand_in = results.items[1]
    assert not ok and isinstance(stand_in, UnexpectedError)
    assert "TwoArgError" in str(stand_in) and "reset by peer" in str(stand_in)
    run_jobs(pool, [(j, f"good-{j}") for j in range(2, 6)])
    results.wait(5, timeout=10)
    assert all(results.items[j][0] for j in range(2, 6))
    assert pool.broken() is None


def test_a_result_the_parent_cannot_read_fails_its_job_and_replaces_the_worker(pool_and_results) -> None:
    pool, results = pool_and_results
    before = set(pool.pids())
    run_jobs(pool, [(1, "two-arg-result")])
    results.wait(1, timeout=10)
    ok, error = results.items[1]
    assert not ok and isinstance(error, UnexpectedError) and error.reason == "unexpected-error"
    assert "TypeError" in str(error)
    # the worker whose pipe said it is replaced, and the pool keeps answering
    assert wait_until(lambda: pool.idle() == 2 and set(pool.pids()) != before)
    assert pool.stats.crashes == 0 and pool.stats.restarts == 1
    run_jobs(pool, [(j, f"good-{j}") for j in range(2, 6)])
    results.wait(5, timeout=10)
    assert all(results.items[j][0] for j in range(2, 6))


def test_a_failed_respawn_leaves_the_slot_empty_and_is_retried(pool_and_results, monkeypatch) -> None:
    pool, results = pool_and_results
    real_spawn = pool._spawn
    attempts: list[float] = []
    refuse = threading.Event()
    refuse.set()

    def spawn(index: int, respawn: bool = False) -> object:
        if respawn and refuse.is_set():
            attempts.append(time.monotonic())
            raise OSError(24, "Too many open files")
        return real_spawn(index, respawn)

    monkeypatch.setattr(pool, "_spawn", spawn)
    run_jobs(pool, [(1, "sigbus")])
    results.wait(1, timeout=10)
    assert isinstance(results.items[1][1], WorkerCrashed)
    # the pool says it is not whole, and the surviving worker still takes and answers jobs
    assert "could not be replaced" in (pool.broken() or "")
    run_jobs(pool, [(j, f"good-{j}") for j in range(2, 5)])
    results.wait(4, timeout=10)
    assert all(results.items[j][0] for j in range(2, 5)) and len(pool.pids()) == 1
    assert wait_until(lambda: len(attempts) >= 2, timeout=10), "the empty slot is retried"
    gaps = [b - a for a, b in pairwise(attempts)]
    assert all(gap >= RESPAWN_BACKOFF.backoff_cap(n) - 0.05 for n, gap in enumerate(gaps, 1)), gaps
    refuse.clear()  # descriptors are back: the next attempt fills the slot
    assert wait_until(lambda: pool.idle() == 2, timeout=30)
    assert pool.broken() is None and pool.stats.restarts == 1


def test_a_fault_in_the_collector_does_not_stop_it(pool_and_results, monkeypatch) -> None:
    pool, results = pool_and_results
    real_receive = pool._receive
    faults = [RuntimeError("a bug in the collector")]

    def receive(worker: object) -> None:
        if faults:
            raise faults.pop()
        real_receive(worker)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "_receive", receive)
    run_jobs(pool, [(1, "a")])
    results.wait(1, timeout=10)  # the result stayed in the pipe and is read on the next pass
    assert results.items[1][0] and not faults
    run_jobs(pool, [(2, "b")])
    results.wait(2, timeout=10)
    assert pool.broken() is None


def test_a_dead_collector_makes_the_pool_broken(pool_and_results, monkeypatch) -> None:
    pool, _ = pool_and_results
    assert pool.broken() is None
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    monkeypatch.setattr(pool, "_collector", dead)
    assert "collector" in (pool.broken() or "")
