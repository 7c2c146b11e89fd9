"""Crash-isolated worker processes: one bad input kills at most its own worker, never the pool.

Unlike ``ProcessPoolExecutor`` (one dead worker breaks the whole pool), each worker has its own
pipe: a death fails only the job it held, as ``WorkerCrashed`` naming the signal, and a fresh
worker takes its place. Each builds its handler once; jobs go only to idle workers, so the
scheduler decides at the last moment what runs next. Workers ignore SIGINT/SIGTERM (the parent
stops them after draining) and exit when their parent's pipe closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from typing import Any, cast

from obsingest.logs import get_logger, log_event
from obsingest.retry import RetryPolicy
from producers.edge.errors import UnexpectedError, WorkerCrashed

log = get_logger("obsingest.edge.worker")

#: ``on_result(job_id, ok, value)``: value is the handler's return (ok) or the error (not ok)
ResultCallback = Callable[[Any, bool, Any], None]
#: waits between attempts to refill a slot whose worker could not be replaced (EMFILE, ENOMEM)
RESPAWN_BACKOFF = RetryPolicy(base_delay=0.5, max_delay=30.0, deadline=None, jitter=False)


@dataclass(frozen=True)
class WorkerInit:
    """What every worker builds once: ``module:Class`` called with ``args``."""

    target: str
    args: tuple[Any, ...] = ()


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def _sendable(reply: tuple[bool, Any]) -> tuple[bool, Any]:
    """``reply``, its error replaced by a stand-in if the parent could not rebuild it (it does
    not pickle, or does not unpickle: an ``__init__`` taking more than the message)."""
    ok, error = reply
    if ok:
        return reply
    try:
        pickle.loads(pickle.dumps(error))
    except Exception as exc:
        return False, UnexpectedError(f"{type(error).__name__}: {error} (cannot be sent back: {exc!r})")
    return reply


def _send_safely(conn: Connection, message: Any) -> bool:
    try:
        conn.send(message)
    except (BrokenPipeError, EOFError, ConnectionResetError):
        return False
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        job_id, (_, error) = message
        stand_in = UnexpectedError(f"{type(error).__name__}: {error} (unpicklable: {exc})")
        conn.send((job_id, (False, stand_in)))
    return True


def worker_main(conn: Connection, init: WorkerInit, log_level: str = "INFO") -> None:
    """Entry point of a worker process."""
    from obsingest import logs

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logs.configure(level=log_level)
    handler = _resolve(init.target)(*init.args)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if message is None:
            break
        job_id, payload = message
        try:
            reply: tuple[bool, Any] = (True, handler(payload))
        except Exception as exc:  # reported to the parent, which classifies it
            reply = _sendable((False, exc))
        if not _send_safely(conn, (job_id, reply)):
            return
    close = getattr(handler, "close", None)
    if callable(close):
        close()


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Connection
    ready: bool = False
    job: Any = None
    pid: int = 0


@dataclass
class PoolStats:
    crashes: int = 0
    restarts: int = 0
    signals: dict[str, int] = field(default_factory=dict)


class WorkerPool:
    """``size`` worker processes; ``submit`` hands a job to an idle one, ``on_result`` hears
    back (from the pool's collector thread)."""

    def __init__(
        self,
        size: int,
        init: WorkerInit,
        on_result: ResultCallback,
        name: str = "edge",
        log_level: str = "INFO",
        start_method: str = "spawn",
        preload: tuple[str, ...] = (),
        respawn_method: str | None = None,
    ) -> None:
        """``"forkserver"`` with ``preload`` modules starts workers as forks of a server that
        imported them once. ``"fork"`` is only safe while the caller has no other threads, i.e.
        at ``start``: replacements for crashed workers then use ``respawn_method``."""
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.size = size
        self.init = init
        self.on_result = on_result
        self.name = name
        self.log_level = log_level
        self.stats = PoolStats()
        self._ctx = get_context(start_method)
        if preload and start_method == "forkserver":
            self._ctx.set_forkserver_preload(list(preload))
        self._respawn_ctx = get_context(respawn_method) if respawn_method else self._ctx
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._workers: list[_Worker] = []
        #: slot index -> (failed respawns, when to try again): a worker that could not be replaced
        self._vacant: dict[int, tuple[int, float]] = {}
        self._stopping = False
        self._collector: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------
    def _spawn(self, index: int, respawn: bool = False) -> _Worker:
        ctx = cast(
            ForkContext | ForkServerContext | SpawnContext, self._respawn_ctx if respawn else self._ctx
        )
        parent, child = ctx.Pipe(duplex=True)
        try:
            process = ctx.Process(
                target=worker_main,
                args=(child, self.init, self.log_level),
                name=f"{self.name}-worker-{index}",
                daemon=True,
            )
            process.start()
        except BaseException:
            parent.close()  # a start that failed (EMFILE, ENOMEM) leaks no descriptors
            raise
        finally:
            child.close()
        return _Worker(index, process, parent, pid=process.pid or 0)

    def start(self, timeout: float = 300.0) -> None:
        """Start every worker and wait until each has built its handler (warm)."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start every worker without waiting for them (``wait_ready`` does)."""
        self._workers = [self._spawn(i) for i in range(self.size)]
        self._collector = threading.Thread(target=self._collect, name=f"{self.name}-pool", daemon=True)
        self._collector.start()

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Until every worker has built its handler; TimeoutError / RuntimeError if not."""

        def ready() -> bool:  # checked at every worker's news (ready, died)
            if self.stats.restarts > 3 * self.size and any(not w.ready for w in self._workers):
                raise RuntimeError(f"{self.name} workers keep dying while starting up")
            return not self._vacant and all(w.ready for w in self._workers)

        with self._changed:
            if not self._changed.wait_for(ready, timeout):
                raise TimeoutError(f"{self.name} workers not ready after {timeout} s")

    def stop(self, timeout: float = 60.0) -> None:
        """Let running jobs finish (up to ``timeout``), then stop every worker."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._stopping = True
            self._changed.wait_for(lambda: all(w.job is None for w in self._workers), timeout)
            workers = list(self._workers)
        for w in workers:
            with contextlib.suppress(OSError, BrokenPipeError):
                w.conn.send(None)
        for w in workers:
            w.process.join(timeout=max(0.1, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
        if self._collector is not None:
            self._collector.join(timeout=5)
        for w in workers:
            w.conn.close()

    # jobs ------------------------------------------------------------------------------------
    def idle(self) -> int:
        with self._lock:
            return sum(w.ready and w.job is None for w in self._workers)

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._workers]

    def broken(self) -> str | None:
        """Why the pool is not whole (its collector thread dead, a slot without a worker), or
        None when it is (or is not running: not launched yet, stopping)."""
        with self._lock:
            if self._collector is None or self._stopping:
                return None
            if not self._collector.is_alive():
                return "the result collector thread is dead: no result is delivered"
            if self._vacant:
                return f"{len(self._vacant)} of {self.size} worker(s) could not be replaced, retrying"
        return None

    def submit(self, job_id: Any, payload: Any) -> bool:
        """Give ``payload`` to an idle worker; False if none is idle (or the pool is stopping)."""
        with self._lock:
            if self._stopping:
                return False
            worker = next((w for w in self._workers if w.ready and w.job is None), None)
            if worker is None:
                return False
            worker.job = job_id
            # if the worker died between jobs, the collector reports the crash for this job
            with contextlib.suppress(BrokenPipeError, OSError):
                worker.conn.send((job_id, payload))
            return True

    # collector -------------------------------------------------------------------------------
    def _collect(self) -> None:
        while True:
            try:  # a fault must not end the thread: no result would ever be delivered again
                with self._lock:
                    if self._stopping and all(not w.process.is_alive() for w in self._workers):
                        return
                    if self._vacant:
                        self._refill()
                    waitables: dict[Any, _Worker] = {}
                    for w in self._workers:
                        waitables[w.conn] = w
                        waitables[w.process.sentinel] = w
                try:
                    ready = wait(list(waitables), timeout=0.5)
                except OSError:
                    ready = []
                for item in ready:
                    worker = waitables[item]
                    if item is worker.conn:
                        self._receive(worker)
                    else:
                        self._died(worker)
            except Exception as exc:
                log_event(log, "pool.collector_failed", logging.ERROR, error=repr(exc))
                time.sleep(0.1)  # a fault that repeats is logged, not spun on

    def _receive(self, worker: _Worker) -> None:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(timeout=0.1)  # exiting: let the sentinel tell, without spinning
            return
        except Exception as exc:  # a message that cannot be rebuilt here (it does not unpickle)
            self._unreadable(worker, exc)
            return
        self._handle(worker, message)

    def _unreadable(self, worker: _Worker, exc: Exception) -> None:
        """Fail the worker's job with an UnexpectedError and replace the worker (killed, its
        exit is handled as any other's): its pipe is not to be trusted any more."""
        with self._changed:
            job, worker.job, worker.ready = worker.job, None, False
            self._changed.notify_all()
        log_event(log, "pool.unreadable_result", logging.ERROR, pid=worker.pid, job=str(job), error=repr(exc))
        with contextlib.suppress(OSError):
            worker.process.kill()
        if job is not None:
            error = UnexpectedError(f"worker pid {worker.pid}'s result for {job} cannot be read: {exc!r}")
            self._deliver(job, False, error)

    def _handle(self, worker: _Worker, message: Any) -> None:
        if message[0] == "ready":
            with self._changed:
                worker.ready = True
                self._changed.notify_all()
            return
        job_id, (ok, value) = message
        with self._changed:
            if worker.job == job_id:
                worker.job = None
            self._changed.notify_all()
        self._deliver(job_id, ok, value)

    def _deliver(self, job_id: Any, ok: bool, value: Any) -> None:
        try:
            self.on_result(job_id, ok, value)
        except Exception as exc:  # a bug in the callback must not stop the collector
            log_event(log, "pool.callback_failed", logging.ERROR, error=repr(exc))

    def _died(self, worker: _Worker) -> None:
        while True:  # a result may have been sent just before the end: take it first
            try:
                if not worker.conn.poll():
                    break
                message = worker.conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:
                self._unreadable(worker, exc)
                break
            self._handle(worker, message)
        worker.process.join(timeout=1)
        code = worker.process.exitcode
        what = _describe_exit(code)
        with self._changed:
            job = worker.job
            worker.job = None
            if worker in self._workers:
                self._workers.remove(worker)
            stopping = self._stopping
            if not stopping:
                self._vacant[worker.index] = (0, 0.0)
                self._refill()
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            worker.conn.close()
        if job is not None:
            self.stats.crashes += 1
            self.stats.signals[what] = self.stats.signals.get(what, 0) + 1
            log_event(log, "pool.worker_crashed", logging.ERROR, pid=worker.pid, exit=what, job=str(job))
            self._deliver(
                job, False, WorkerCrashed(f"worker pid {worker.pid} died ({what}) while handling {job}")
            )
        elif not stopping:
            log_event(log, "pool.worker_exited", logging.WARNING, pid=worker.pid, exit=what)

    def _refill(self) -> None:
        """Replace the workers of vacant slots that are due (holding the lock); a slot whose
        spawn fails (EMFILE, ENOMEM, fork refused) stays empty until its backoff ends."""
        now = time.monotonic()
        for index, (failures, due) in list(self._vacant.items()):
            if now < due:
                continue
            try:
                replacement = self._spawn(index, respawn=True)
            except Exception as exc:
                failures += 1
                wait_s = RESPAWN_BACKOFF.backoff_cap(failures)
                self._vacant[index] = (failures, now + wait_s)
                log_event(
                    log,
                    "pool.respawn_failed",
                    logging.ERROR,
                    slot=index,
                    failures=failures,
                    retry_in_s=wait_s,
                    error=repr(exc),
                )
                continue
            del self._vacant[index]
            self._workers.append(replacement)
            self.stats.restarts += 1
            self._changed.notify_all()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
