"""GroupCommit (functions.register.announce): concurrent callers' items applied together, each
caller back only once its own items are applied, a batch's error raised to its callers only."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from functions.register.announce import GroupCommit

pytestmark = pytest.mark.unit


class Applier:
    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[list[int]] = []
        self.applied: set[int] = set()
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, items: list[int]) -> None:
        time.sleep(0.01)
        with self.lock:
            self.calls.append(items)
            if self.fail_on in items:
                raise OSError("database is locked")
            self.applied.update(items)


def test_concurrent_callers_share_calls_and_return_after_their_items():
    applier = Applier()
    group = GroupCommit(applier)

    def call(i: int) -> bool:
        group([i])
        return i in applier.applied  # applied before the caller got back

    with ThreadPoolExecutor(64) as pool:
        assert all(pool.map(call, range(200)))
    assert sorted(i for c in applier.calls for i in c) == list(range(200))
    assert len(applier.calls) < 200 / 4


def test_a_lone_caller_is_applied_at_once():
    applier = Applier()
    GroupCommit(applier)([1, 2])
    assert applier.calls == [[1, 2]]


def test_an_error_reaches_exactly_the_callers_of_its_batch():
    applier = Applier(fail_on=7)
    group = GroupCommit(applier)
    with ThreadPoolExecutor(16) as pool:
        futures = {i: pool.submit(group, [i]) for i in range(40)}
        errors = {i for i, f in futures.items() if f.exception() is not None}
    failed_batch = next(c for c in applier.calls if 7 in c)
    assert errors == set(failed_batch)
    assert applier.applied == set(range(40)) - errors
