"""Group commit: the items of concurrent callers applied together, by a leader among them.

A caller queues its item and either waits while a batch is applied or, when none is under way,
leads: it applies batches until its own item is done. Gathering (the Butler backend, whose
transactions have a large fixed cost): a batch with room waits, at most ``gather`` s, while
callers are preparing (``arriving``), while arrivals come in a burst (spaced under ``gap``, or
during this wait), or for ``gap`` after a group's first item (``fresh``); not once ``complete``.
Arrivals during the wait count as a burst whatever their spacing: with many handler threads the
dispatcher gets the GIL only now and then, and stopping at the first pause over ``gap`` would
split an exposure delivered at once into two transactions.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from obsingest import camera
from obsingest.dataid import DataId


class Item(Protocol):
    done: bool  # set (under the lock) once the item's batch is through


T = TypeVar("T", bound=Item)


class GroupCommit(Generic[T]):
    """Submits items to ``flush`` in batches; ``flush`` must record every item's result or error."""

    def __init__(
        self,
        flush: Callable[[list[T]], None],
        max_batch: int = sys.maxsize,
        gather: float = 0.0,
        gap: float = 0.0,
        linger: float = 0.0,
        fresh: Callable[[list[T]], bool] | None = None,
        complete: Callable[[list[T]], bool] | None = None,
        prepare: Callable[[list[T]], None] | None = None,
    ) -> None:
        self._flush = flush
        #: work ahead of a batch's flush, on the items queued when its gathering starts
        self._prepare = prepare
        #: whether a batch holds the first item of a group whose other items are expected
        self._fresh = fresh or (lambda batch: False)
        #: whether a batch holds every item of its groups (no more can come)
        self._complete = complete or (lambda batch: False)
        self.max_batch = max_batch
        self.gather = gather
        self.gap = gap
        self.linger = linger
        #: monotonic times of the two latest arrivals
        self._arrivals = (float("-inf"), float("-inf"))
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        #: the leader waits here for the end of a gathering
        self._gathered = threading.Condition(self._lock)
        #: each follower waits on its own condition (by ``id`` of its item), woken only when its
        #: item is done or it may lead: one wake-up per follower, not every caller per batch
        self._waiters: dict[int, threading.Condition] = {}
        self._queue: list[T] = []
        self._leader = False
        #: callers inside ``arriving`` that have not submitted yet
        self.preparing = 0
        self._local = threading.local()

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """This thread prepares an item and submits it inside the block (or gives up)."""
        if getattr(self._local, "arriving", False):  # nested: the outer block counts it
            yield
            return
        with self._cond:
            self.preparing += 1
            self._arrived()
        self._local.arriving = True
        try:
            yield
        finally:
            if self._local.arriving:  # gave up (or failed) before submitting
                self._local.arriving = False
                with self._cond:
                    self.preparing -= 1
                    self._wake_gatherer()

    def submit(self, item: T) -> None:
        """Queue ``item`` and return once its batch has been flushed."""
        with self._cond:
            if getattr(self._local, "arriving", False):
                self._local.arriving = False
                self.preparing -= 1
            else:
                self._arrived()
            self._queue.append(item)
            self._wake_gatherer()
            if self._leader:
                waiter = self._waiters[id(item)] = threading.Condition(self._lock)
                try:
                    while not item.done and self._leader:
                        waiter.wait()
                finally:
                    del self._waiters[id(item)]
            lead = not item.done
            if lead:
                self._leader = True
        if lead:
            self._lead(item)

    def _arrived(self) -> None:  # lock held
        self._arrivals = (self._arrivals[1], time.monotonic())

    def _wake_gatherer(self) -> None:
        """(lock held) Wake a gathering leader once waiting no longer gains anything."""
        if not self.preparing or len(self._queue) >= self.max_batch:
            self._gathered.notify_all()

    def _lead(self, mine: T) -> None:
        """Flush batches until ``mine`` is done; then hand leadership to a waiting caller."""
        try:
            while not mine.done:
                if self.linger:
                    time.sleep(self.linger)
                start = time.monotonic()
                if self._prepare is not None:
                    with self._cond:
                        queued = list(self._queue)
                    self._prepare(queued)
                with self._cond:
                    self._gather(start)
                    batch = self._queue[: self.max_batch]
                    del self._queue[: len(batch)]
                try:
                    self._flush(batch)
                finally:
                    with self._cond:
                        for item in batch:
                            item.done = True
                            waiter = self._waiters.get(id(item))
                            if waiter is not None:
                                waiter.notify()
        finally:
            with self._cond:
                self._leader = False
                # the first caller still queued leads next (its batch takes the others)
                waiter = self._waiters.get(id(self._queue[0])) if self._queue else None
                if waiter is not None:
                    waiter.notify()

    def _gather(self, start: float) -> None:
        """(lock held) Wait while the batch has room and callers are still preparing or
        arriving in a burst, at most ``gather`` seconds from ``start``."""
        deadline = start + self.gather
        fresh_until = start + self.gap if self._fresh(self._queue) else start
        while len(self._queue) < self.max_batch and not self._complete(self._queue):
            now = time.monotonic()
            if now >= deadline:
                return
            if self.preparing:
                self._gathered.wait(deadline - now)
                continue
            previous, last = self._arrivals
            streaming = last - previous < self.gap or last > start  # see the module doc
            burst_until = last + self.gap if streaming else last
            until = max(burst_until, fresh_until)
            if now >= until:
                return
            self._gathered.wait(min(deadline, until) - now)


@dataclass(eq=False)
class _Items:
    """One caller's items in an ``applying`` group commit."""

    items: list[Any]
    done: bool = False
    error: BaseException | None = field(default=None, repr=False)


def applying(apply: Callable[[list[Any]], None]) -> Callable[[list[Any]], None]:
    """``apply`` as a plain group commit: the callable returned takes one caller's items and
    applies them with concurrent callers' in one ``apply`` call, raising that call's error as if
    the caller had called ``apply`` itself."""

    def flush(batch: list[_Items]) -> None:
        try:
            apply([item for entry in batch for item in entry.items])
        except BaseException as exc:  # each caller of the batch raises it
            for entry in batch:
                entry.error = exc

    commit: GroupCommit[_Items] = GroupCommit(flush)

    def call(items: list[Any]) -> None:
        entry = _Items(items)
        commit.submit(entry)
        if entry.error is not None:
            raise entry.error

    return call


def exposures_complete(data_ids: Iterable[DataId]) -> bool:
    """Every exposure among ``data_ids`` has all its camera's detectors there."""
    detectors: dict[tuple[str, int], set[int]] = {}
    for d in data_ids:
        detectors.setdefault((d.instrument, d.exposure), set()).add(d.detector)
    try:
        return bool(detectors) and all(
            len(found) >= len(camera.instrument(instrument).detectors)
            for (instrument, _), found in detectors.items()
        )
    except KeyError:  # an instrument the camera module does not describe: keep gathering
        return False
