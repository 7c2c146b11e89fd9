"""The DAQ's hand-off directory: what a file there means, when it is complete, and noticing it
(the rules: producers/edge/README.md). Watchdog's events and the scans are handled on one thread,
so no locks. A file is offered once per (mtime, size).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from obsingest.dataid import DataId, Identity
from obsingest.errors import PermanentError
from obsingest.logs import get_logger, log_event
from producers.edge.errors import NeverCompleted, SourceUnreadable, SourceVanished
from producers.edge.identity import handoff_identity_and_readout
from producers.edge.settings import EdgeSettings
from producers.edge.sidecar import load_sidecar

log = get_logger("obsingest.edge.handoff")

#: what a raw CCD's name ends with (any name before it)
CCD_SUFFIXES = (".fits", ".fits.fz")
IN_PROGRESS = (".tmp", ".part")
QUARANTINE_DIR = "quarantine"
DONE_DIR = "done"
_OWN_DIRS = (QUARANTINE_DIR, DONE_DIR)
#: settle checks, never-completed timeouts and the rescan clock run this often (seconds)
TICK_SECONDS = 0.1

Kind = Literal["ccd", "manifest", "incomplete", "bad"]


@dataclass(frozen=True)
class Found:
    """A complete file (or a bad one) in the hand-off directory."""

    kind: Kind
    path: Path
    sidecar: Path | None = None
    mtime: float = 0.0
    error: PermanentError | None = None
    #: the camera's names for the CCD (observation id, raft, sensor), read from its header
    identity: Identity | None = None
    size: int = -1
    #: the end of the CCD's readout from its header's DATE-END (epoch seconds, UTC), if it has one
    readout: float | None = None

    @property
    def data_id(self) -> DataId | None:
        return self.identity.data_id if self.identity is not None else None


def classify(path: Path) -> Kind | None:
    """What the file at ``path`` is by its suffix; None for files the edge ignores (sidecars:
    taken with their CCD; anything else: not the DAQ's)."""
    name = path.name
    if name.endswith(IN_PROGRESS):
        return "incomplete"
    if name.endswith(".manifest.json"):
        return "manifest"
    if name.endswith(CCD_SUFFIXES):
        return "ccd"
    return None


def identify(found: Found) -> Found | None:
    """A complete raw CCD with its identity from its header (and sidecar), or the same file as
    ``bad`` with the reason (no identity, a sidecar or a name naming another CCD, not FITS);
    None if it vanished meanwhile. SourceUnreadable (retriable) if it cannot be read now."""
    sidecar = sidecar_of(found.path)
    cards = None
    try:
        if sidecar is not None:
            try:
                cards = load_sidecar(sidecar)
            except SourceVanished:
                sidecar = None  # taken away before its CCD was read: the CCD goes without it
        identity, readout = handoff_identity_and_readout(found.path, cards)
    except SourceVanished:
        return None
    except PermanentError as exc:
        return replace(found, kind="bad", sidecar=sidecar, error=exc)
    return replace(found, kind="ccd", sidecar=sidecar, identity=identity, readout=readout)


def sidecar_of(path: Path) -> Path | None:
    stem = path.name.removesuffix(".fz").removesuffix(".fits")
    candidate = path.with_name(stem + ".json")
    return candidate if candidate.exists() else None


class HandoffIntake:
    """Finds complete files under ``root`` and passes each to ``on_found`` once; one it could
    not take now (False: spool full) is offered again by a later scan. ``on_problem`` hears
    "source-unreadable" problems (None once the directory reads again)."""

    def __init__(
        self,
        root: Path,
        on_found: Callable[[Found], bool],
        on_problem: Callable[[str | None], None] = lambda _p: None,
        *,
        settings: EdgeSettings | None = None,
        known: Mapping[str, tuple[float, int]] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.on_found = on_found
        self.on_problem = on_problem
        self.settings = settings or EdgeSettings()
        self._events: queue.Queue[tuple[str, str, str]] = queue.Queue()
        #: settle mode: path -> ((mtime, size) last seen, since when it has not changed)
        self._tracked: dict[Path, tuple[tuple[float, int], float]] = {}
        self._incomplete: set[Path] = set()
        #: path (text) -> (mtime, size) taken, by this run or (``known``) finished before it: a
        #: scan passes over these by text, without building a Path for each
        self._taken: dict[str, tuple[float, int]] = dict(known or {})
        self._problem: str | None = None
        self._next_scan = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        self._rewatch_at = 0.0
        self._unwatched: str | None = None  # the problem while no watcher runs

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.scan()
        self._observer = self._watch()
        self._thread = threading.Thread(target=self._run, name="edge-handoff", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:  # first: it may replace the watcher until it ends
            self._thread.join(timeout=5)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)

    def _watch(self) -> Any:
        from watchdog.observers import Observer

        observer: Any = Observer()  # watchdog dispatches to any object with ``dispatch``
        observer.schedule(self, str(self.root), recursive=True, event_filter=_watched(self.settings.complete))
        observer.start()
        return observer

    def _check_watcher(self, now: float) -> None:
        """A watcher thread that died (an inotify error ends it silently) leaves new files to the
        next rescan, past the budget: start a new one, then scan for what it missed."""
        observer = self._observer
        if now < self._rewatch_at or observer is None:
            return
        if observer.is_alive() and all(emitter.is_alive() for emitter in observer.emitters):
            return
        log_event(log, "handoff.watcher_died", logging.ERROR, root=str(self.root))
        self._rewatch_at = now + 5.0  # a failing restart is tried every 5 s, not every tick
        with contextlib.suppress(Exception):
            observer.stop()
        try:
            self._observer = self._watch()
        except OSError as exc:
            self._unwatched = f"source-unwatched: hand-off directory {self.root}: {exc}"
            self._set_problem(self._unwatched)
            return
        self._unwatched = None
        self.scan()

    def request_rescan(self) -> None:
        self._events.put(("rescan", "", ""))

    def dispatch(self, event: Any) -> None:
        """watchdog's callback, on its thread: only queues the event for the intake thread."""
        dest = os.fsdecode(getattr(event, "dest_path", "") or "")
        if event.is_directory:  # created or moved in: the only directory events ``_watched`` asks for
            self._events.put(("rescan", dest or os.fsdecode(event.src_path), ""))
        else:
            self._events.put((event.event_type, os.fsdecode(event.src_path), dest))

    # the intake thread -----------------------------------------------------------------------
    def _run(self) -> None:
        ticked = 0.0
        while not self._stop.is_set():
            try:
                kind, src, dest = self._events.get(timeout=TICK_SECONDS)
            except queue.Empty:
                kind = ""
            try:
                if kind == "rescan":
                    self.scan(Path(src) if src else None)
                elif kind:
                    self._event(kind, Path(src), Path(dest) if dest else None)
                # at most every TICK_SECONDS through a burst: each tick stats every pending file
                if time.monotonic() - ticked >= TICK_SECONDS:
                    ticked = time.monotonic()
                    self.tick()
            except Exception as exc:  # the intake must outlive any one odd file
                log_event(log, "handoff.failed", logging.ERROR, error=repr(exc))

    def _event(self, kind: str, src: Path, dest: Path | None) -> None:
        if kind == "moved":
            self._forget(src)
            if dest is not None and not self._skipped(dest):
                self._consider(dest, complete=self.settings.complete == "rename")
        elif kind == "deleted":
            self._forget(src)
        elif not self._skipped(src):
            if kind == "closed":
                self._consider(src, complete=self.settings.complete == "rename")
            elif kind in ("created", "modified"):
                self._consider(src, complete=False)

    def _forget(self, path: Path) -> None:
        self._tracked.pop(path, None)
        self._incomplete.discard(path)
        self._taken.pop(str(path), None)

    def _skipped(self, path: Path) -> bool:
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return True
        if not parts or parts[0] in _OWN_DIRS:
            return True
        return any(p.startswith(".") for p in parts[:-1])

    def scan(self, under: Path | None = None) -> None:
        """Offer every complete file under the root (start-up, every rescan_interval), or only
        under ``under``, a new directory whose files may have arrived before watchdog watched it
        (one that cannot be walked falls back to the root, whose scan reports what is unreadable)."""
        if under is not None:
            if self._skipped(under / "-"):
                return
            try:
                self._walk(under)
            except OSError:
                self.scan()
            return
        self._next_scan = time.time() + self.settings.rescan_interval
        visited: set[str] = set()
        try:
            if not os.access(self.root, os.R_OK | os.X_OK):
                raise PermissionError(f"{self.root}: not readable")
            self._walk(self.root, visited)
        except OSError as exc:
            self._set_problem(f"source-unreadable: hand-off directory {self.root}: {exc}")
            return
        self._set_problem(self._unwatched)
        # forget what no longer is here (moved out with its directory, or gone before a restart
        # that the journal's finished files were read at): weeks of files otherwise
        self._taken = {path: seen for path, seen in self._taken.items() if path in visited}

    def _walk(self, top: Path, visited: set[str] | None = None) -> None:
        for dirpath, dirnames, filenames in os.walk(top, onerror=_raise):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and not (here == self.root and d in _OWN_DIRS)
            )
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if visited is not None:
                    visited.add(path)
                if self._taken and self._unchanged(path):
                    continue
                self._consider(here / name, complete=self.settings.complete == "rename")

    def _unchanged(self, path: str) -> bool:
        """Taken already with its present mtime and size: one stat, not the naming rules nor a
        Path, for each of the thousands a hand-off directory keeps. A file changed since is
        forgotten and offered as any other."""
        taken = self._taken.get(path)
        if taken is None:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        if (st.st_mtime, st.st_size) == taken:
            return True
        del self._taken[path]
        return False

    def _set_problem(self, problem: str | None) -> None:
        if problem != self._problem:
            self._problem = problem
            if problem:
                log_event(log, "handoff.unreadable", logging.ERROR, error=problem)
            else:
                log_event(log, "handoff.readable", root=str(self.root))
            self.on_problem(problem)

    def _consider(self, path: Path, complete: bool) -> None:
        kind = classify(path)
        if kind is None:
            return
        if kind == "incomplete" and path in self._incomplete:
            return  # known as being written: ``tick`` follows it (each write is an event)
        try:
            st = path.stat()
        except FileNotFoundError:
            self._forget(path)
            return
        except OSError as exc:
            self._set_problem(f"source-unreadable: {path}: {exc}")
            return
        seen = (st.st_mtime, st.st_size)
        if self._taken.get(str(path)) == seen:
            return
        if kind == "incomplete":
            self._incomplete.add(path)
            return
        if complete:
            self._offer(Found(kind, path, mtime=st.st_mtime, size=st.st_size))
            return
        if path not in self._tracked or self._tracked[path][0] != seen:
            self._tracked[path] = (seen, time.time())

    def _offer(self, found: Found) -> None:
        if found.kind == "ccd":
            try:
                identified = identify(found)
            except SourceUnreadable as exc:
                self._set_problem(f"source-unreadable: {exc}")
                return  # offered again by a later scan
            if identified is None:
                self._forget(found.path)
                return
            found = identified
        self._tracked.pop(found.path, None)
        if self.on_found(found):
            self._taken[str(found.path)] = (found.mtime, found.size)

    def tick(self) -> None:
        """Settle checks, never-completed timeouts and the periodic rescan."""
        now = time.time()
        for path, (seen, quiet_since) in list(self._tracked.items()):
            try:
                st = path.stat()
            except OSError:
                self._tracked.pop(path, None)
                continue
            if (st.st_mtime, st.st_size) != seen:
                self._tracked[path] = ((st.st_mtime, st.st_size), now)
            elif now - quiet_since >= self.settings.settle_seconds:
                kind = classify(path)
                if kind is not None:
                    self._offer(Found(kind, path, mtime=st.st_mtime, size=st.st_size))
        for path in list(self._incomplete):
            try:
                st = path.stat()
            except OSError:
                self._incomplete.discard(path)
                continue
            mtime = st.st_mtime
            if now - mtime >= self.settings.incomplete_timeout:
                self._incomplete.discard(path)
                error = NeverCompleted(
                    f"{path}: still in progress {now - mtime:.0f} s after its last write "
                    f"(timeout {self.settings.incomplete_timeout:g} s): the writer never finished it"
                )
                self._offer(Found("incomplete", path, None, mtime, error, size=st.st_size))
        self._check_watcher(now)
        if now >= self._next_scan:
            self.scan()


def _raise(exc: OSError) -> None:
    raise exc


def _watched(mode: Literal["rename", "settle"] = "settle") -> list[type[Any]]:
    """The watchdog events ``dispatch`` takes, the only ones asked of the kernel (the inotify
    mask): no opens or read-only closes; writes (one event per write) only in ``settle`` mode,
    where each restarts its file's quiet period."""
    from watchdog import events

    return [
        events.FileCreatedEvent,
        *([events.FileModifiedEvent] if mode == "settle" else []),
        events.FileMovedEvent,
        events.FileDeletedEvent,
        events.FileClosedEvent,
        events.DirCreatedEvent,
        events.DirMovedEvent,
    ]
