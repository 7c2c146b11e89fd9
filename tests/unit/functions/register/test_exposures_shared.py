"""Concurrent exposure checks share their queries (ExposureCloser.close_quietly): every caller
returns after a check that started after it asked (so it saw the caller's registration), a
burst costs two checks, not one per CCD, and a failed check covers nobody. The check is a
recorder (the real one is exercised by test_exposures.py and the PostgreSQL integration)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from functions.register.exposures import ExposureCloser
from obsingest.registry.ingested import NOT_COMPLETE, Closing
from obsingest.registry.registry import RegistryUnavailable

pytestmark = pytest.mark.unit

E = 2026112200001


class GatedCheck:
    """The first check blocks until ``gate`` opens (and fails if ``fail_first``); each check
    records how many callers had asked when it started."""

    def __init__(self, closer_ref: list[ExposureCloser], fail_first: bool = False) -> None:
        self.closer_ref = closer_ref
        self.fail_first = fail_first
        self.gate = threading.Event()
        self.started: list[int] = []
        #: the outbox rows each check was given to mark
        self.marked: list[list[int]] = []
        self.lock = threading.Lock()

    def check(self, instrument: str, exposure: int, published: Sequence[int] = ()) -> Closing:
        flights = self.closer_ref[0]._flights
        with self.lock:
            self.started.append(flights[(instrument, exposure)].asked)
            self.marked.append(sorted(published))
            first = len(self.started) == 1
        if first:
            self.gate.wait(30)
            if self.fail_first:
                raise RegistryUnavailable("registry down")
        return Closing(instrument, exposure, NOT_COMPLETE)


class MarkRecorder:
    """The announcer's ``mark``: rows marked on their own (a failed check's)."""

    def __init__(self) -> None:
        self.marked: list[list[int]] = []

    def mark(self, row_ids: list[int]) -> None:
        self.marked.append(sorted(row_ids))


def _closer(fail_first: bool = False) -> tuple[ExposureCloser, GatedCheck]:
    ref: list[ExposureCloser] = []
    check = GatedCheck(ref, fail_first)
    closer = ExposureCloser(check, announcer=MarkRecorder())  # type: ignore[arg-type]
    ref.append(closer)
    return closer, check


def _burst(closer: ExposureCloser, check: GatedCheck, callers: int) -> list:
    """``callers`` concurrent calls, caller ``i`` with its published outbox row ``100 + i``."""
    results: list = [None] * callers
    order: list[int] = []

    def call(i: int) -> None:
        results[i] = closer.close_quietly("LSSTCam", E, [100 + i])

    first = threading.Thread(target=call, args=(0,))
    first.start()
    while not check.started:  # the first check is running (blocked on the gate)
        time.sleep(0.001)
    others = [threading.Thread(target=call, args=(i,)) for i in range(1, callers)]
    for t in others:
        t.start()
    while closer._flights[("LSSTCam", E)].asked < callers:  # all asked during that check
        time.sleep(0.001)
    check.gate.set()
    for t in [first, *others]:
        t.join(30)
        order.append(t.is_alive())
    assert not any(order), "a caller never returned"
    return results


def test_a_burst_of_callers_shares_two_checks():
    closer, check = _closer()
    results = _burst(closer, check, 20)
    # the running check started before 19 of them asked: one more check covers them all
    assert check.started == [1, 20]
    # each check marks the rows of the callers it covers: one statement for both
    assert check.marked == [[100], list(range(101, 120))]
    assert closer.announcer.marked == []  # type: ignore[attr-defined]
    assert all(r is not None and r.outcome == NOT_COMPLETE for r in results)
    assert closer._flights == {}  # nothing kept once everyone is through


def test_a_failed_check_covers_nobody():
    closer, check = _closer(fail_first=True)
    results = _burst(closer, check, 10)
    assert results[0] is None  # logged, deferred to the sweep
    assert check.started == [1, 10]  # the others had their own (shared) check
    assert all(r is not None for r in results[1:])
    # the failed check's row is marked on its own; the others' with their check
    assert closer.announcer.marked == [[100]]  # type: ignore[attr-defined]
    assert check.marked == [[100], list(range(101, 110))]


def test_callers_one_after_the_other_each_check():
    closer, check = _closer()
    check.gate.set()
    for _ in range(3):
        assert closer.close_quietly("LSSTCam", E).outcome == NOT_COMPLETE
    assert check.started == [1, 1, 1]  # a fresh flight each time: nobody to share with
