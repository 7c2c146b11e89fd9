"""The group commit (obsingest/registry/group_commit.py), one test per policy.

Plain (``applying``, the outbox marks): concurrent callers' items applied together, each caller
back only once its own items are applied, a batch's error raised to its callers only.
Gathering (the Butler batches): a batch waits for the callers still preparing (bounded by
``gather``), for the first item's siblings (``fresh``, ``gap``), for arrivals that keep coming
during its wait however far apart (each less than ``gap`` after the last), and no longer once
``complete``; ``prepare`` is given the leader's items before it gathers; a lone caller waits
for nobody; a caller that gives up releases the batch; a full
batch (``max_batch``) goes at once; ``linger`` sleeps before each batch. Pure logic: ``flush``
is a recorder."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from obsingest.dataid import DataId
from obsingest.registry.group_commit import GroupCommit, applying, exposures_complete

pytestmark = pytest.mark.unit

#: long enough that a test relying on it instead of the rule under test hangs visibly
FOREVER = 60.0


@dataclass(eq=False)
class Item:
    n: int
    done: bool = False


class Flushes:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[Item]) -> None:
        with self.lock:
            self.batches.append(sorted(i.n for i in batch))


def _run(fn, *args) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def _joined(*threads: threading.Thread) -> bool:
    for t in threads:
        t.join(30.0)
    return not any(t.is_alive() for t in threads)


def test_a_batch_waits_for_every_caller_still_preparing():
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=256, gather=FOREVER)
    everyone_preparing = threading.Barrier(40)

    def caller(n: int) -> None:
        with commit.arriving():
            everyone_preparing.wait(30)
            commit.submit(Item(n))

    with ThreadPoolExecutor(40) as pool:
        list(pool.map(caller, range(40)))
    assert flushes.batches == [list(range(40))]
    assert commit.preparing == 0


def test_a_lone_caller_waits_for_nobody():
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=256, gather=FOREVER, gap=0.0)

    def lone() -> None:
        with commit.arriving():
            commit.submit(Item(1))

    assert _joined(_run(lone))  # it would wait ``FOREVER`` for anyone still preparing
    assert flushes.batches == [[1]] and commit.preparing == 0


def test_a_caller_that_gives_up_releases_the_batch():
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=256, gather=FOREVER)
    preparing, give_up = threading.Event(), threading.Event()

    def quitter() -> None:
        with pytest.raises(ValueError), commit.arriving():
            preparing.set()
            give_up.wait(30)
            raise ValueError("corrupt file: quarantined, never submitted")

    other = _run(quitter)
    preparing.wait(30)
    submitter = _run(commit.submit, Item(2))  # waits for the quitter...
    give_up.set()  # ...until it gives up
    assert _joined(other, submitter)
    assert flushes.batches == [[2]] and commit.preparing == 0


def test_prepare_sees_the_leaders_items_while_the_others_are_still_preparing():
    flushes = Flushes()
    seen: list[tuple[list[int], int]] = []
    commit: GroupCommit[Item] = GroupCommit(
        flushes,
        max_batch=256,
        gather=FOREVER,
        prepare=lambda queued: seen.append((sorted(i.n for i in queued), commit.preparing)),
    )
    preparing = threading.Barrier(5)  # the four others and this test
    go_on = threading.Event()

    def other(n: int) -> None:
        with commit.arriving():
            preparing.wait(30)
            go_on.wait(30)  # still preparing while the first caller leads
            commit.submit(Item(n))

    others = [_run(other, n) for n in range(1, 5)]
    preparing.wait(30)
    first = _run(commit.submit, Item(0))  # leads; its batch gathers for the others
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.001)
    go_on.set()
    assert _joined(first, *others)
    assert seen[0] == ([0], 4)  # before gathering: its own item, four callers still preparing
    assert flushes.batches == [[0, 1, 2, 3, 4]]


def test_gathering_is_bounded_by_gather():
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=256, gather=0.05)
    preparing, release = threading.Event(), threading.Event()

    def slow() -> None:
        with commit.arriving():
            preparing.set()
            release.wait(30)  # a read that hangs
            commit.submit(Item(9))

    stuck = _run(slow)
    preparing.wait(30)
    commit.submit(Item(1))  # flushed after at most ``gather``, without the stuck one
    assert flushes.batches == [[1]]
    release.set()
    assert _joined(stuck)
    assert flushes.batches == [[1], [9]]


def test_arrivals_during_the_wait_keep_the_batch_open_however_far_apart():
    """A stream reaching the group commit with a pause longer than ``gap`` between two arrivals
    (a starved dispatcher) is still one batch while each comes within ``gap`` of the last."""
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=256, gather=FOREVER, gap=0.5)
    holding, give_up = threading.Event(), threading.Event()

    def holder() -> None:  # keeps the leader gathering until the second arrival is queued
        with commit.arriving():
            holding.set()
            give_up.wait(30)

    held = _run(holder)
    holding.wait(30)
    first = _run(commit.submit, Item(1))
    time.sleep(0.6)  # longer than ``gap`` after the last arrival
    second = _run(commit.submit, Item(2))
    time.sleep(0.05)
    give_up.set()  # nobody preparing: the last two arrivals were 0.6 s apart, the last just now
    time.sleep(0.15)
    third = _run(commit.submit, Item(3))  # within ``gap`` of the second: same batch
    assert _joined(held, first, second, third)
    assert flushes.batches == [[1, 2, 3]]


def test_the_first_item_of_a_group_waits_for_its_siblings_until_complete():
    flushes = Flushes()
    commit = GroupCommit(
        flushes,
        max_batch=256,
        gather=FOREVER,
        gap=FOREVER,
        fresh=lambda batch: True,
        complete=lambda batch: len(batch) == 3,
    )
    first = _run(commit.submit, Item(1))  # nothing else preparing: only ``fresh`` holds it
    second = _run(commit.submit, Item(2))
    third = _run(commit.submit, Item(3))
    assert _joined(first, second, third)
    assert flushes.batches == [[1, 2, 3]]


def test_a_full_batch_is_flushed_at_once_and_the_rest_follows():
    flushes = Flushes()
    commit = GroupCommit(flushes, max_batch=10, gather=FOREVER)
    everyone_preparing = threading.Barrier(25)

    def caller(n: int) -> None:
        with commit.arriving():
            everyone_preparing.wait(30)
            commit.submit(Item(n))

    with ThreadPoolExecutor(25) as pool:
        list(pool.map(caller, range(25)))
    assert all(len(b) <= 10 for b in flushes.batches)
    assert sorted(n for b in flushes.batches for n in b) == list(range(25))


def test_a_flush_that_raises_still_finishes_its_batch():
    def broken(batch: list[Item]) -> None:
        raise RuntimeError("bug")

    commit = GroupCommit(broken, max_batch=256)
    item = Item(1)
    with pytest.raises(RuntimeError):
        commit.submit(item)
    assert item.done
    follower = Item(2)
    with pytest.raises(RuntimeError):  # leadership was handed back: the next caller leads
        commit.submit(follower)
    assert follower.done


def test_exposures_complete_counts_distinct_detectors_per_exposure():
    whole = [DataId("LSSTCam", 2026112200001, d) for d in range(205)]
    assert exposures_complete(whole)
    assert not exposures_complete(whole[:-1] + whole[:1])  # 204 detectors, one twice
    other = [DataId("LSSTCam", 2026112200002, 0)]
    assert not exposures_complete(whole + other)
    assert exposures_complete([DataId("LATISS", 2026112200003, 0)])  # one detector
    assert not exposures_complete([])


# plain policy (``applying``) ----------------------------------------------------------------


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


def test_plain_concurrent_callers_share_calls_and_return_after_their_items():
    applier = Applier()
    group = applying(applier)

    def call(i: int) -> bool:
        group([i])
        return i in applier.applied  # applied before the caller got back

    with ThreadPoolExecutor(64) as pool:
        assert all(pool.map(call, range(200)))
    assert sorted(i for c in applier.calls for i in c) == list(range(200))
    assert len(applier.calls) < 200 / 4


def test_plain_a_lone_caller_is_applied_at_once():
    applier = Applier()
    applying(applier)([1, 2])
    assert applier.calls == [[1, 2]]


def test_plain_an_error_reaches_exactly_the_callers_of_its_batch():
    applier = Applier(fail_on=7)
    group = applying(applier)
    with ThreadPoolExecutor(16) as pool:
        futures = {i: pool.submit(group, [i]) for i in range(40)}
        errors = {i for i, f in futures.items() if f.exception() is not None}
    failed_batch = next(c for c in applier.calls if 7 in c)
    assert errors == set(failed_batch)
    assert applier.applied == set(range(40)) - errors


def test_linger_sleeps_before_each_batch():
    flushes = Flushes()
    commit = GroupCommit(flushes, linger=0.2)
    started = time.monotonic()
    commit.submit(Item(1))
    assert time.monotonic() - started >= 0.2
    assert flushes.batches == [[1]]


def test_many_callers_small_batches_each_item_flushed_once_and_every_caller_returns():
    """Each follower is woken only for its own item or to lead next: none is left waiting."""
    flushes = Flushes()
    commit: GroupCommit[Item] = GroupCommit(flushes, max_batch=7)
    with ThreadPoolExecutor(64) as pool:
        done = list(pool.map(lambda n: commit.submit(Item(n)) or n, range(300)))
    assert done == list(range(300))
    flushed = [n for batch in flushes.batches for n in batch]
    assert sorted(flushed) == list(range(300))
    assert max(len(b) for b in flushes.batches) <= 7
    assert not commit._waiters
