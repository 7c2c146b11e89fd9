"""The worker pool: a worker killed by a signal (SIGBUS, as a truncated memory map does) fails
its own job with WorkerCrashed and is replaced; the other workers and jobs never notice."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time

import pytest

from obsingest.errors import CorruptFile
from obsingest.retry import RetriesExhausted
from producers.edge.errors import UnexpectedError, WorkerCrashed
from producers.edge.worker import WorkerInit, WorkerPool

pytestmark = pytest.mark.unit


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
