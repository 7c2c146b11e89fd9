"""Run a backfill: journal every file, upload in parallel processes, verify, resume after a crash.

The journal (``SPOOL/backfill.sqlite3``, the edge's format) gets every file as ``seen`` before
anything is sent, each batch as ``sent`` before a worker gets it, each file as ``acked`` once the
store provably holds its bytes. A rerun re-puts what is not acked (the quarantined too): the
store is create-once, so a file that did arrive answers "exists" and is verified. Commits are
not fsynced: an OS crash only loses acks, redone as re-verifications, and nothing irreversible
follows an ack.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, TextIO

from obsingest.logs import get_logger, log_event
from obsingest.retry import RetryPolicy
from producers.backfill.sources import expand_sources
from producers.backfill.transfer import FileResult, split_destination
from producers.edge.journal import Entry, Journal, State
from producers.edge.worker import WorkerInit, WorkerPool

log = get_logger("obsingest.backfill")

JOURNAL_NAME = "backfill.sqlite3"

#: a journal update: (key, new state or None, other columns)
_Update = tuple[str, State | None, dict[str, Any]]


@dataclass(frozen=True)
class BackfillConfig:
    sources: list[str]
    destination: str
    spool: Path = Path("./backfill-spool")
    parallel: int = 4
    batch: int = 8
    #: rounds of retries for files that failed transiently
    retries: int = 3
    retry_pause: float = 2.0
    progress: bool = True
    #: object name prefix, over the destination's (file://DIR has none: give raw/ to ingest)
    prefix: str | None = None


@dataclass
class BackfillReport:
    files: int = 0
    already_done: int = 0
    stored: int = 0
    exists: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # PREFIX + source path -> "reason: err"
    bytes: int = 0
    seconds: float = 0.0

    @property
    def verified(self) -> int:
        return self.stored + self.exists

    @property
    def gbit_s(self) -> float:
        return self.bytes * 8 / 1e9 / self.seconds if self.seconds > 0 else 0.0

    @property
    def files_s(self) -> float:
        return self.verified / self.seconds if self.seconds > 0 else 0.0

    def table(self) -> str:
        reasons = Counter(v.split(":", 1)[0] for v in self.failed.values())
        rows = [
            ("files", f"{self.files:,}"),
            ("already done (journal)", f"{self.already_done:,}"),
            ("uploaded and verified", f"{self.stored:,}"),
            ("already in the store, verified", f"{self.exists:,}"),
            ("failed", f"{len(self.failed):,}"),
            ("bytes sent", f"{self.bytes:,}"),
            ("seconds", f"{self.seconds:.2f}"),
            ("files/s", f"{self.files_s:,.1f}"),
            ("Gbit/s", f"{self.gbit_s:.3f}"),
        ]
        rows += [(f"  failed: {reason}", f"{n:,}") for reason, n in sorted(reasons.items())]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name:<{width}}  {value:>14}" for name, value in rows]
        for name, why in list(self.failed.items())[:20]:
            lines.append(f"  {name}: {why}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        out = {**asdict(self), "seconds": round(self.seconds, 3)}
        return {**out, "files_s": round(self.files_s, 1), "gbit_s": round(self.gbit_s, 4)}


class _Run:
    """The dispatch loop, pipelined so that no worker waits for the journal: every worker's next
    batch is journalled ``sent`` ahead of time, and the collector thread hands it over the moment
    the worker reports. One transaction then records the finished batch's acks with the ``sent``
    of the batch after next.
    """

    def __init__(self, config: BackfillConfig, journal: Journal, report: BackfillReport, bar: Any) -> None:
        self.config = config
        self.journal = journal
        self.report = report
        self.bar = bar
        self.pool: WorkerPool | None = None
        self.results: list[tuple[list[str], bool, Any]] = []
        self.ready: deque[list[Entry]] = deque()  # journalled ``sent``, not yet handed out
        self.outstanding = 0  # handed out, result not yet taken by the dispatch loop
        self.cond = threading.Condition()

    def on_result(self, job: list[str], ok: bool, value: Any) -> None:
        with self.cond:
            self._hand_out()  # the worker that just reported is idle: its next batch, now
            self.results.append((job, ok, value))
            self.cond.notify_all()

    def _hand_out(self) -> None:
        """Give ready batches to idle workers (``self.cond`` held)."""
        pool = self.pool
        while pool is not None and self.ready and pool.idle():
            batch = self.ready[0]
            if not pool.submit([e.key for e in batch], [(e.key, e.source) for e in batch]):
                break
            self.ready.popleft()
            self.outstanding += 1

    def run_round(self, pool: WorkerPool, todo: list[Entry]) -> list[Entry]:
        """Send ``todo``; the entries that failed transiently (to retry)."""
        self.pool = pool
        by_key = {e.key: e for e in todo}
        size = self.config.batch
        batches = deque(todo[i : i + size] for i in range(0, len(todo), size))
        retry: list[Entry] = []
        updates: list[_Update] = []  # results not yet committed
        while True:
            with self.cond:
                spare = max(0, 2 * pool.size - self.outstanding - len(self.ready))
            fresh = [batches.popleft() for _ in range(min(spare, len(batches)))]
            updates += [(e.key, "sent", {"attempts": e.attempts + 1}) for b in fresh for e in b]
            if updates:
                self.journal.mark_many(updates)
                updates = []
            with self.cond:
                self.ready.extend(fresh)
                self._hand_out()
                if not (batches or self.ready or self.outstanding or self.results):
                    break
                self.cond.wait_for(lambda: bool(self.results), timeout=0.5)
                done, self.results = self.results, []
                self.outstanding -= len(done)
            for keys, ok, value in done:
                if not ok and len(keys) > 1:  # the worker died on one file, maybe: each alone
                    batches.extend([by_key[k]] for k in keys)
                    continue
                if not ok:  # the worker failed on this file: retried
                    reason, error = getattr(value, "reason", "error"), f"{type(value).__name__}: {value}"
                    value = [FileResult(k, False, retriable=True, reason=reason, error=error) for k in keys]
                retry += [by_key[r.key] for r in self._record(value, updates)]
        return retry

    def _record(self, results: list[FileResult], updates: list[_Update]) -> list[FileResult]:
        """Count ``results`` and add their journal updates to ``updates``; the transient ones."""
        transient = []
        sent = 0
        for r in results:
            if r.ok:
                acked = {"status": r.status, "size": r.size, "checksum": r.checksum, "object": r.object}
                updates.append((r.key, "acked", {**acked, "acked_at": time.time()}))
                if r.status == "stored":
                    self.report.stored += 1
                else:
                    self.report.exists += 1
                self.report.bytes += r.size
                sent += r.size
                self.report.failed.pop(r.key, None)
                continue
            self.report.failed[r.key] = f"{r.reason}: {r.error}"
            if r.retriable:
                transient.append(r)
                updates.append((r.key, None, {"reason": r.reason, "error": r.error}))
            else:
                updates.append((r.key, "quarantined", {"reason": r.reason, "error": r.error}))
                log_event(log, "backfill.failed", object=r.key, reason=r.reason, error=r.error)
        if self.bar is not None:
            self.bar.update(sent)
            self.bar.set_postfix(files=self.report.verified, failed=len(self.report.failed), refresh=False)
        return transient


def run_backfill(config: BackfillConfig, out: TextIO = sys.stderr) -> BackfillReport:
    """Journal, upload, verify; the report (its ``failed`` is empty when everything is in)."""
    store_url, prefix = split_destination(config.destination)
    if config.prefix is not None:
        prefix = f"{config.prefix.strip('/')}/" if config.prefix.strip("/") else ""
    started = time.monotonic()
    files = expand_sources(config.sources, prefix)
    journal = Journal(config.spool, name=JOURNAL_NAME)
    try:
        # keyed by where the file is (stable across reruns), not by the object its header names
        journal.add_many(Entry(key=f.name, source=str(f.path), size=f.size) for f in files)
        wanted = {f.name for f in files}
        # the quarantined too: what refused them may be fixed (a stale object, a permission);
        # a file still bad fails again with its reason, so exit 0 means every file is in
        todo = [e for e in journal.pending() + journal.quarantined() if e.key in wanted]
        report = BackfillReport(files=len(files), already_done=len(files) - len(todo))
        log_event(
            log,
            "backfill.start",
            files=len(files),
            todo=len(todo),
            destination=config.destination,
            parallel=config.parallel,
        )
        run = _Run(config, journal, report, None)
        # workers fork before this process has another thread: they inherit these imports
        if store_url.startswith("gs://"):
            import_module("obsingest.store.gcs")
            import_module("google.auth.transport.urllib3")
        import_module("producers.backfill.transfer")
        pool = WorkerPool(
            min(config.parallel, max(1, len(todo))),
            WorkerInit("producers.backfill.transfer:UploadWorker", (store_url, prefix)),
            run.on_result,
            name="backfill",
            start_method="fork",
            respawn_method="spawn",
        )
        if todo:
            pool.start()
            started = time.monotonic()
            run.bar = _bar(todo, config, out)
            try:
                rounds = RetryPolicy.doubling(config.retries + 1, config.retry_pause)
                for attempt in range(1, rounds.max_attempts + 1):
                    todo = run.run_round(pool, todo)
                    if not todo:
                        break
                    if attempt < rounds.max_attempts:
                        time.sleep(rounds.backoff(attempt))
            finally:
                pool.stop()
                if run.bar is not None:
                    run.bar.close()
        report.seconds = time.monotonic() - started
        log_event(log, "backfill.done", **report.to_json())
        return report
    finally:
        journal.close()


def _bar(todo: list[Entry], config: BackfillConfig, out: TextIO) -> Any:
    if not config.progress:
        return None
    from tqdm import tqdm

    return tqdm(
        total=sum(e.size or 0 for e in todo),
        unit="B",
        unit_scale=True,
        unit_divisor=1000,
        desc=f"backfill {len(todo):,} files",
        file=out,
        dynamic_ncols=True,
        mininterval=0.5,
    )
