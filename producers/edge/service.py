"""The edge service (producers/edge/README.md): one engine thread owns the scheduler and decides
what runs; crash-isolated worker processes (``worker``, ``ccd``) read, compress and send; the
hand-off intake and ``submit`` journal new CCDs. Everything in memory is rebuilt from the journal at
start-up. One cohesive concept: the engine's loop and every journal transition it makes; the
policies live apart (``scheduler``, ``refusal``, ``files``, ``failures``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from obsingest.errors import ObsIngestError, PermanentError, ResourceExhausted
from obsingest.logs import get_logger, log_event
from obsingest.messages import ExposureManifest
from obsingest.retry import RetryPolicy
from producers.edge.ccd import SPOOL_CCD_DIR, CcdFile, Outcome, OutcomeStatus, SendFailed
from producers.edge.errors import BadHandoffFile, SourceUnreadable, SpoolFull, SpoolUnavailable, WorkerCrashed
from producers.edge.failures import judge
from producers.edge.files import (
    manifest_json,
    move_to_quarantine,
    read_manifest,
    readout_from_manifest,
    release_raw,
    second_file,
)
from producers.edge.handoff import Found, HandoffIntake
from producers.edge.journal import Entry, Journal
from producers.edge.refusal import Refusal
from producers.edge.scheduler import Scheduler
from producers.edge.settings import EdgeSettings
from producers.edge.worker import WorkerInit, WorkerPool

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

log = get_logger("obsingest.edge")

EDGE = "edge"
#: ``counts()`` name -> the edge's CCD outcome or own count it reads
COUNTS = {"accepted": "seen", "acked": "acknowledged", "refused": "refused"} | {
    name: name
    for name in ["resumed", "duplicates", "worker_crashes", "over_budget", "raw_bytes", "sent_bytes"]
}
#: the counts the ``edge.stopped`` log line carries
LOGGED_COUNTS = ["accepted", "resumed", "acked", "refused", "quarantined", "worker_crashes", "over_budget"]

GAUGE_SECONDS = 5.0
PURGE_SECONDS = 3600.0
EXIT_REFUSING = 75  # refused new work longer than max_refusing_seconds (EX_TEMPFAIL)
EXIT_INTERNAL = 70  # the engine itself failed (EX_SOFTWARE)
#: imported once by the pool's fork server: workers start as forks of it in milliseconds
WORKER_PRELOAD = (
    "producers.edge.ccd",
    "producers.compress",
    "producers.sender",
    "producers.uploader",
    "obsingest.store.gcs",
    "obsingest.store.local",
)


class EdgeService:
    def __init__(
        self, settings: EdgeSettings, log_level: str = "INFO", metrics: Metrics | None = None
    ) -> None:
        self.settings = settings
        self.log_level = log_level
        self.spool = Path(settings.spool).resolve()
        self.handoff = Path(settings.handoff).resolve() if settings.handoff else None
        from obsingest.metrics import private_metrics

        #: workers never touch it: one killed by a signal leaves no stale per-process series
        self.metrics = metrics or private_metrics()
        self.metrics.start(EDGE)
        self._gauges_at = 0.0
        self.queue_depths = (0, 0)  # (pending, in flight), as of the engine's last turn
        self.scheduler = Scheduler(
            RetryPolicy(base_delay=settings.retry_base_delay, max_delay=settings.retry_max_delay)
        )
        self.journal: Journal | None = None
        self.pool: WorkerPool | None = None
        self.intake: HandoffIntake | None = None
        self.health_server: Any = None
        self.state = "starting"
        self.exit_code = 0
        #: what the engine thread runs next (the intake's, the workers' and ``stop``'s news)
        self._events: queue.Queue[Callable[[], None]] = queue.Queue()
        self._futures: dict[str, list[Future[Outcome]]] = {}
        #: key -> the row just journalled for a new CCD, so its first dispatch need not read it back
        self._fresh: dict[str, Entry] = {}
        self._failures: dict[str, int] = {}
        self.refusal = Refusal(self.spool, settings.min_free_bytes)
        self._source_problem: str | None = None
        #: what ran out at the last failed attempt (DestinationFull, ...) until an ack, and since when
        self.exhausted: ResourceExhausted | None = None
        self.exhausted_since = 0.0
        self._draining = False
        self._engine: threading.Thread | None = None
        self._stopped = threading.Event()
        self._idle = threading.Condition()
        self._last_check = self._purged_at = 0.0

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> EdgeService:
        """Open the journal (SpoolFull / SpoolUnavailable: cannot start), resume what it holds,
        warm the workers, then take new work."""
        s = self.settings
        self.journal = Journal(self.spool)
        self._purge(time.monotonic())
        pending = self.journal.pending()
        for entry in pending:
            if self.scheduler.add(entry.key, entry.priority):
                self.metrics.add(EDGE, "resumed")
        if resumed := self.metrics.count(EDGE, "resumed"):
            log_event(log, "edge.resumed_from_journal", ccds=resumed)
        self._drop_unneeded_copies(pending)
        self._finish_quarantine_moves()
        if s.health_port >= 0:  # up first: "starting" (503) while the workers warm up
            from producers.edge.health import HealthServer

            self.health_server = HealthServer(self.health, s.health_host, s.health_port)
            try:
                (self.spool / "health.port").write_text(f"{self.health_server.port}\n")
            except OSError as exc:  # a full spool must not stop the service from starting
                log_event(log, "edge.health_port_unwritten", logging.WARNING, error=str(exc))
        self.pool = WorkerPool(
            s.workers,
            WorkerInit(
                "producers.edge.ccd:CcdWorker",
                (
                    s.destination,
                    s.prefix,
                    s.quarantine_prefix,
                    str(self.spool),
                    s.threads,
                    True,
                    s.on_ack != "keep",
                ),
            ),
            self._on_result,
            log_level=self.log_level,
            start_method="forkserver",
            preload=WORKER_PRELOAD,
        )
        self.pool.launch()  # the workers start while the hand-off directory is scanned
        self._engine = threading.Thread(target=self._run, name="edge-engine", daemon=True)
        self._engine.start()
        if self.handoff is not None:
            # on_ack delete/move: an acknowledged file still here is one a crash kept from its
            # release, so it is offered again and ``_accept`` releases it
            known = self.journal.handed_off(acked=s.on_ack == "keep")
            self.intake = HandoffIntake(
                self.handoff, self._on_found, self._on_source_problem, settings=s, known=known
            )
            self.intake.start()
        self.pool.wait_ready()
        # astropy's imports (seconds) now, not by the intake at a night's first CCD
        threading.Thread(target=_warm_time_scales, name="edge-warm-timescales", daemon=True).start()
        self.state = "ready"
        log_event(
            log,
            "edge.started",
            destination=s.destination,
            spool=str(self.spool),
            handoff=str(self.handoff) if self.handoff else None,
            workers=s.workers,
            pending=len(self.scheduler),
            pids=self.pool.pids(),
        )
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Take no new work, let in-flight sends finish (up to ``timeout``), stop. Everything
        not yet acknowledged stays journalled for the next start."""
        if self.state == "stopped":
            return
        self.state = "draining"
        if self.intake is not None:
            self.intake.stop()
        self._events.put(self._drain)
        if self._engine is not None:
            self._engine.join(timeout=timeout)
        if self.pool is not None:
            self.pool.stop(timeout=max(1.0, timeout))
        if self.health_server is not None:
            self.health_server.stop()
        if self.journal is not None:
            self.journal.close()
        self.state = "stopped"
        for future in (f for futures in self._futures.values() for f in futures):
            future.cancel()
        counts = self.counts()
        log_event(log, "edge.stopped", exit_code=self.exit_code, **{k: counts[k] for k in LOGGED_COUNTS})
        self._stopped.set()

    def __enter__(self) -> EdgeService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is queued or in flight (True), or ``timeout`` (False)."""
        with self._idle:  # the engine notifies at every turn
            return self._idle.wait_for(lambda: not len(self.scheduler) and self._events.empty(), timeout)

    # intake: the Python API and the hand-off directory --------------------------------------
    def submit(self, ccd: CcdFile) -> Future[Outcome]:
        """Journal one CCD and queue it; the future resolves when it is acked or quarantined.
        SpoolFull / SpoolUnavailable while the service refuses new work, BadObjectName for an
        impossible data id: nothing was journalled then."""
        return self.submit_many([ccd])[0]

    def submit_many(self, ccds: list[CcdFile]) -> list[Future[Outcome]]:
        """``submit`` for a whole readout, journalled in one commit (all or none)."""
        futures: list[Future[Outcome]] = [Future() for _ in ccds]
        entries = [
            Entry(
                key=ccd.data_id.key,
                source=str(Path(ccd.path).resolve()),
                priority=ccd.exposure,
                readout=ccd.readout_time.timestamp() if ccd.readout_time else time.time(),
                sidecar=ccd.sidecar,
            )
            for ccd in ccds
        ]
        self._accept(entries, futures)
        return futures

    def submit_manifest(self, manifest: ExposureManifest) -> None:
        """Record an exposure's manifest (readout time and expected detectors)."""
        assert self.journal is not None
        self.journal.record_exposure(manifest.instrument, manifest.exposure, manifest_json(manifest))

    def _accept(
        self, entries: list[Entry], futures: list[Future[Outcome]] | None = None, found: Found | None = None
    ) -> bool:
        """Journal ``entries`` and queue the new ones. ``found``: the hand-off file of the one
        entry (a ``_second_file`` if the journal has its CCD from another file)."""
        assert self.journal is not None
        if self.state in ("draining", "stopped"):
            raise SpoolUnavailable("the edge service is stopping: no new work taken")
        if not self.refusal.space_ok():
            self.metrics.ccd(EDGE, "refused", n=len(entries))
            raise SpoolFull(f"refused {entries[0].key}: {self.refusal.reason}")
        try:
            existing = self.journal.add_batch(entries)
        except (SpoolFull, SpoolUnavailable) as exc:
            self.metrics.ccd(EDGE, "refused", n=len(entries))
            self.refusal.refuse(exc.reason, str(exc))
            raise
        for i, (entry, known) in enumerate(zip(entries, existing, strict=True)):
            future = futures[i] if futures else None
            if known is None:
                self.metrics.ccd(EDGE, "seen")
                log_event(log, "edge.accepted", data_id=entry.key, source=entry.source)
                self._fresh[entry.key] = entry
            elif found is not None and known.source != entry.source:
                self._second_file(found, known)
                continue
            else:
                self.metrics.add(EDGE, "duplicates")
                if known.terminal:
                    if known.state == "acked":
                        self._after_ack(entry.key)  # a crash may have come between ack and release
                    if future is not None:
                        future.set_result(_outcome_of(known))
                    continue
            self._events.put(partial(self._queue, entry.key, entry.priority, future))
        return True

    def _on_found(self, found: Found) -> bool:
        """The intake found a complete file (or a bad one): journal it or quarantine it."""
        try:
            if found.kind == "ccd":
                assert found.data_id is not None and self.journal is not None
                entry = Entry(
                    key=found.data_id.key,
                    source=str(found.path),
                    priority=found.data_id.exposure,
                    readout=self._readout_of(found),
                    sidecar=str(found.sidecar) if found.sidecar else None,
                    source_mtime=found.mtime,
                    source_size=found.size,
                )
                return self._accept([entry], found=found)
            if found.kind == "manifest":
                if manifest := read_manifest(found.path):  # None: it vanished
                    self.submit_manifest(manifest)
                    log_event(
                        log,
                        "edge.manifest",
                        instrument=manifest.instrument,
                        exposure=manifest.exposure,
                        detectors=len(manifest.detectors),
                    )
                return True
            error = found.error or BadHandoffFile(f"{found.path}: not a file the edge takes")
            self._quarantine_file(found.path, error, found.sidecar)  # a refused CCD's sidecar too
            return True
        except (SpoolFull, SpoolUnavailable):
            return False
        except ObsIngestError as exc:
            self._quarantine_file(found.path, exc)
            return True

    def _readout_of(self, found: Found) -> float:
        """The header's DATE-END; else the exposure manifest's end of exposure; else the file's
        mtime (producers/edge/README.md, "Readout time")."""
        assert self.journal is not None and found.data_id is not None
        if found.readout is not None:
            return found.readout
        text = self.journal.exposure_manifest(found.data_id.instrument, found.data_id.exposure)
        return readout_from_manifest(text) if text else found.mtime

    def _second_file(self, found: Found, first: Entry) -> None:
        """Another hand-off file for a CCD the journal has from a first one (``second_file``): a
        duplicate (released as ``on_ack`` says once the first is acked) or a checksum conflict."""
        verdict = second_file(found.path, first)
        self.metrics.add(EDGE, "duplicates")
        if verdict is None:
            log_event(log, "edge.duplicate_file", data_id=first.key, file=str(found.path), first=first.source)
            if first.state == "acked" and self.handoff is not None:
                release_raw(self.handoff, self.settings, [str(found.path)])
            return
        log_event(
            log,
            "edge.conflict",
            logging.ERROR,
            data_id=first.key,
            file=str(found.path),
            first=first.source,
            reason=verdict.reason,
        )
        self._quarantine_file(found.path, verdict, found.sidecar)

    def _on_source_problem(self, problem: str | None) -> None:
        self._source_problem = problem

    # the engine ------------------------------------------------------------------------------
    def _on_result(self, key: str, ok: bool, value: Any) -> None:
        self._events.put(partial(self._result, key, ok, value))

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:
            log_event(log, "edge.engine_failed", logging.CRITICAL, error=repr(exc))
            self.exit_code = EXIT_INTERNAL
            threading.Thread(target=self.stop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._dispatch()
            if self._draining and not self.scheduler.in_flight:
                return
            wait = self.scheduler.wait_time()
            if wait == 0.0 and self.pool is not None and not self.pool.idle():
                # due work but every worker busy: only a result (an event) frees one, so wait
                # for it instead of polling every millisecond through the burst
                wait = None
            timeout = 0.25 if wait is None else min(0.25, max(wait, 0.001))
            with contextlib.suppress(queue.Empty):  # every event queued, then on
                self._events.get(timeout=timeout)()
                while True:
                    self._events.get_nowait()()
            self._periodic()
            self.queue_depths = (self.scheduler.queued, len(self.scheduler.in_flight))
            with self._idle:
                self._idle.notify_all()

    def _queue(self, key: str, priority: int, future: Future[Outcome] | None) -> None:
        if future is not None:
            self._futures.setdefault(key, []).append(future)
        self.scheduler.add(key, priority)

    def _drain(self) -> None:
        self._draining = True
        dropped = self.scheduler.drop_queued()
        self._fresh.clear()
        log_event(log, "edge.draining", in_flight=len(self.scheduler.in_flight), left_in_journal=len(dropped))

    def _dispatch(self) -> None:
        assert self.pool is not None and self.journal is not None
        while not self._draining and self.pool.idle():
            key = self.scheduler.pop_due()
            if key is None:
                return
            entry = self._fresh.pop(key, None) or self.journal.get(key)
            if entry is None or entry.terminal:
                self.scheduler.finished(key)
                continue
            if not self.pool.submit(key, entry):
                self.scheduler.requeue(key)
                return

    def _result(self, key: str, ok: bool, value: Any) -> None:
        if ok:
            self._acked(key, value)
            return
        outcome, error = (value.outcome, value.error) if isinstance(value, SendFailed) else (None, value)
        verdict = judge(error, self.settings.destination)
        error = verdict.error
        if verdict.action == "quarantine":
            self._quarantine(key, error)
            return
        if verdict.action == "crash":
            if isinstance(error, WorkerCrashed):
                self.metrics.add(EDGE, "worker_crashes")
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            if failures >= self.settings.crash_limit:
                self._quarantine(key, error)
                return
            self._note_failure(key, error, outcome)
            self.scheduler.requeue(key)
            return
        if isinstance(error, SourceUnreadable):
            self._source_problem = f"source-unreadable: {error}"
        if (exhausted := verdict.exhausted) is not None:
            if self.exhausted is None:
                self.exhausted_since = time.monotonic()
            self.exhausted = exhausted
            self.metrics.exhausted(EDGE, exhausted.reason)
        self._note_failure(key, error, outcome)
        wait = self.scheduler.retry(key, destination_fault=verdict.destination_fault)
        log_event(
            log,
            "edge.retry",
            logging.WARNING,
            data_id=key,
            reason=error.reason,
            error=str(error)[:500],
            retry_in_s=round(wait, 2),
            spooled=bool(outcome and outcome.spooled),
        )

    def _note_failure(self, key: str, error: ObsIngestError, outcome: Outcome | None) -> None:
        self.metrics.ccd(EDGE, "retried", reason=error.reason)
        values: dict[str, Any] = {"reason": error.reason, "error": str(error)[:2000]}
        if outcome is not None:
            values["attempts"] = outcome.attempts
            if outcome.journal_error:
                self.refusal.refuse("spool-full", outcome.journal_error)
        self._mark(key, **values)

    def _acked(self, key: str, outcome: Outcome) -> None:
        self.scheduler.done(key)
        self._failures.pop(key, None)
        self.exhausted = None
        if self._source_problem and self.intake is None:
            self._source_problem = None
        self.metrics.ccd(EDGE, "acknowledged")
        if outcome.compress_seconds or outcome.read_seconds:
            self.metrics.ccd(EDGE, "compressed")
            self.metrics.edge_stage("compress", outcome.read_seconds + outcome.compress_seconds)
        self.metrics.ccd(EDGE, "sent")
        self.metrics.edge_stage("send", outcome.send_seconds)
        self.metrics.add(EDGE, f"acked_{outcome.status}")
        self.metrics.add(EDGE, "raw_bytes", outcome.raw_size)
        self.metrics.add(EDGE, "sent_bytes", outcome.size)
        latency = outcome.latency
        extra: dict[str, Any] = {}
        if outcome.journal_error:
            self.refusal.refuse("spool-full", outcome.journal_error)
        if latency is not None and latency > self.settings.budget_seconds:
            self.metrics.add(EDGE, "over_budget")
            extra["over_budget"] = 1
            log_event(
                log,
                "edge.over_budget",
                logging.WARNING,
                data_id=key,
                seconds=round(latency, 3),
                budget=self.settings.budget_seconds,
                attempts=outcome.attempts,
            )
        if outcome.status == "conflict":
            extra.update(
                reason="checksum-conflict",
                error=f"different bytes already stored; parked as {outcome.object_name}",
            )
            log_event(log, "edge.conflict", logging.ERROR, data_id=key, parked=outcome.object_name)
        if extra:
            self._mark(key, **extra)
        log_event(
            log,
            "edge.acked",
            data_id=key,
            status=outcome.status,
            object=outcome.object_name,
            size=outcome.size,
            attempts=outcome.attempts,
            latency_s=round(latency, 4) if latency is not None else None,
        )
        self._after_ack(key)
        self._resolve(key, outcome)

    def _after_ack(self, key: str) -> None:
        """on_ack: delete or move the raw file (and its sidecar) once its CCD is acknowledged (a
        checksum conflict's stays for a person to judge)."""
        if self.settings.on_ack == "keep" or self.handoff is None or self.journal is None:
            return
        entry = self.journal.get(key)
        if entry is not None and entry.state == "acked" and entry.status != "conflict":
            release_raw(self.handoff, self.settings, [p for p in (entry.source, entry.sidecar) if p])

    def _quarantine(self, key: str, error: ObsIngestError) -> None:
        """The CCD cannot succeed: journal why (durably), move its file aside, tell the caller."""
        assert self.journal is not None
        self.scheduler.finished(key)
        self._failures.pop(key, None)
        self._journal_quarantine(key, error, data_id=key)
        entry = self.journal.get(key)
        if entry is not None:
            move_to_quarantine(self.handoff, Path(entry.source), error, entry.sidecar)
            if entry.spooled:
                Path(entry.spooled).unlink(missing_ok=True)
        self._resolve(key, Outcome(key=key, state="quarantined", reason=error.reason, error=str(error)))

    def _drop_unneeded_copies(self, pending: list[Entry]) -> None:
        """Spooled compressed copies are for pending CCDs only: delete the rest, which a crash kept
        (killed between the ack and the copy's deletion, or between a spill and its journal mark),
        each a whole CCD of the spool that buffers outages."""
        directory = self.spool / SPOOL_CCD_DIR
        needed = {Path(entry.spooled).name for entry in pending if entry.spooled}
        try:
            unneeded = [name for name in os.listdir(directory) if name not in needed]
        except FileNotFoundError:
            return
        for name in unneeded:
            (directory / name).unlink(missing_ok=True)
        if unneeded:
            log_event(log, "edge.spool_copies_dropped", logging.WARNING, files=len(unneeded))

    def _finish_quarantine_moves(self) -> None:
        """A quarantine is journalled before its file is moved aside, so a crash in between left the
        file in the hand-off directory, where the intake skips it as finished: move it now (the
        same file only: one since written under that name is the intake's to judge)."""
        assert self.journal is not None
        if self.handoff is None:
            return
        for entry in self.journal.quarantined():
            try:
                st = os.stat(entry.source)
            except OSError:
                continue  # moved aside already, or gone
            if (st.st_mtime, st.st_size) != (entry.source_mtime, entry.source_size):
                continue
            error = PermanentError(entry.error or "quarantined")
            error.reason = entry.reason or error.reason
            move_to_quarantine(self.handoff, Path(entry.source), error, entry.sidecar)
            log_event(
                log, "edge.quarantine_move_finished", logging.WARNING, file=entry.source, reason=error.reason
            )

    def _quarantine_file(self, path: Path, error: ObsIngestError, sidecar: Path | None = None) -> None:
        """A hand-off file that is no CCD the edge can take (bad name, never completed, bad
        manifest): journalled under ``file:<path>`` and moved aside with its reason and sidecar."""
        self._journal_quarantine(f"file:{path}", error, source=str(path), file=str(path))
        move_to_quarantine(self.handoff, path, error, sidecar)

    def _journal_quarantine(
        self, key: str, error: ObsIngestError, source: str | None = None, **where: str
    ) -> None:
        """Count, log and durably journal one quarantine (a new row for ``source``, if given;
        ``where``: the log's data_id or file)."""
        self.metrics.ccd(EDGE, "quarantined", reason=error.reason)
        log_event(
            log, "edge.quarantined", logging.ERROR, **where, reason=error.reason, error=str(error)[:500]
        )
        assert self.journal is not None
        reason, text = error.reason, str(error)[:2000]
        try:
            if source is not None:
                self.journal.add(
                    Entry(key=key, source=source, state="quarantined", reason=reason, error=text)
                )
            self.journal.mark(key, "quarantined", durable=True, reason=reason, error=text)
        except (SpoolFull, SpoolUnavailable) as exc:
            self.refusal.refuse(exc.reason, str(exc))

    def _mark(self, key: str, **values: Any) -> None:
        """Journal ``values`` for ``key``; a journal that takes no writes makes the edge refuse."""
        assert self.journal is not None
        try:
            self.journal.mark(key, None, **values)
        except (SpoolFull, SpoolUnavailable) as exc:
            self.refusal.refuse(exc.reason, str(exc))

    def _resolve(self, key: str, outcome: Outcome) -> None:
        for future in self._futures.pop(key, []):
            if not future.done():
                future.set_result(outcome)

    # refusing new work ------------------------------------------------------------------------
    def _periodic(self) -> None:
        now = time.monotonic()
        if now - self._last_check < 0.5:
            return
        self._last_check = now
        self._refresh_gauges(now)
        if now - self._purged_at >= PURGE_SECONDS:
            self._purge(now)
        if not self.refusal.refusing:
            self.refusal.space_ok()  # refuse before new work arrives, not only when it does
        elif self.refusal.can_resume():
            assert self.journal is not None
            try:
                self.journal.touch()  # the journal takes writes again
            except (SpoolFull, SpoolUnavailable):
                return
            self.refusal.resumed()
            if self.intake is not None:
                self.intake.request_rescan()
        limit = self.settings.max_refusing_seconds
        if limit and self.refusal.refusing_for() > limit and self.exit_code == 0:
            log_event(
                log, "edge.giving_up", logging.CRITICAL, refusing=self.refusal.reason, exit_code=EXIT_REFUSING
            )
            self.exit_code = EXIT_REFUSING
            threading.Thread(target=self.stop, daemon=True).start()

    def _purge(self, now: float) -> None:
        """Forget what was acknowledged more than ``keep_days`` ago (at start and every hour: an
        edge runs for weeks, and a month of rows is gigabytes of spool)."""
        assert self.journal is not None
        self._purged_at = now
        keep_days = self.settings.keep_days
        try:
            purged = self.journal.purge(older_than=time.time() - keep_days * 86400)
        except (SpoolFull, SpoolUnavailable) as exc:  # a delete needs a little room: next hour
            log_event(log, "edge.journal_purge_failed", logging.WARNING, error=str(exc))
            return
        if purged:
            log_event(log, "edge.journal_purged", rows=purged, keep_days=keep_days)

    def _refresh_gauges(self, now: float) -> None:
        """Spool gauges (a journal count query each): CCDs by journal state, age of the oldest
        unacknowledged one, free bytes, refusal."""
        if now - self._gauges_at < GAUGE_SECONDS or self.journal is None:
            return
        self._gauges_at = now
        try:
            depths = self.journal.counts()
            oldest = self.journal.oldest_unacknowledged_readout()
            free = self.refusal.free_bytes()
        except Exception as exc:  # a full or broken spool must not stop the engine
            log.warning("edge.metrics_refresh_failed", extra={"error": str(exc)})
            return
        age = max(0.0, time.time() - oldest) if oldest is not None else 0.0
        refusing = self.refusal.reason.split(":", 1)[0] if self.refusal.reason else None
        self.metrics.edge_spool(depths, age, free, refusing)

    # health ----------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``GET /health``: ready | degraded (with reasons) | starting | draining | stopped, and
        the counts."""
        reasons = [r for r in (self.refusal.reason, self._source_problem) if r]
        if self.pool is not None and (broken := self.pool.broken()):
            reasons.append(f"worker-pool: {broken}")
        scheduler, exhausted = self.scheduler, self.exhausted
        if exhausted is not None:
            reasons.append(f"{exhausted.reason}: {str(exhausted)[:300]}; retrying until it is back")
        elif scheduler.destination_down:
            reasons.append(
                f"destination-unreachable: {scheduler.dest_failures} failed attempt(s) in a row, retrying"
            )
        counts: dict[str, int] = {}
        if self.journal is not None and self.state != "stopped":
            with contextlib.suppress(SpoolFull, SpoolUnavailable):
                counts = self.journal.counts()
        return {
            "status": "degraded" if self.state == "ready" and reasons else self.state,
            "reasons": reasons,
            "refusing_new_work": self.refusal.refusing,
            "journal": counts,
            "destination": {
                "url": self.settings.destination,
                "down": scheduler.destination_down,
                "failures": scheduler.dest_failures,
                "exhausted": exhausted.reason if exhausted is not None else None,
            },
            "stats": self.counts(),
        }

    def counts(self) -> dict[str, Any]:
        """What this edge counted, read from its metrics (``/health``'s ``stats``), and its queue."""
        m = self.metrics
        own = m.by_label("obsingest_service_counts_total", "counter", component=EDGE)
        own |= m.by_label("obsingest_ccds_total", "outcome", component=EDGE)
        out: dict[str, Any] = {name: own.get(counted, 0) for name, counted in COUNTS.items()}
        out["statuses"] = {n[6:]: v for n, v in own.items() if n.startswith("acked_")}
        out["quarantined"] = m.by_label("obsingest_ccds_quarantined_total", "reason", component=EDGE)
        out["retries"] = m.by_label("obsingest_ccds_retried_total", "reason", component=EDGE)
        out["pending"], out["in_flight"] = self.queue_depths
        return out


def _warm_time_scales() -> None:
    from producers.edge.identity import readout_end

    readout_end({"DATE-END": "2026-01-01T00:00:00", "TIMESYS": "TAI"}.get)


def _outcome_of(entry: Entry) -> Outcome:
    """What the journal says became of an item already finished."""
    return Outcome(
        key=entry.key,
        state="acked" if entry.state == "acked" else "quarantined",  # a finished item's
        status=cast(OutcomeStatus, entry.status or ""),  # journalled from an Outcome's status
        object_name=entry.object or "",
        size=entry.size or 0,
        checksum=entry.checksum or "",
        attempts=entry.attempts,
        reason=entry.reason or "",
        error=entry.error or "",
        readout_time=datetime.fromtimestamp(entry.readout, UTC) if entry.readout else None,
        acked_time=datetime.fromtimestamp(entry.acked_at, UTC) if entry.acked_at else None,
    )
