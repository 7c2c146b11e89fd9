"""One harness run driving the edge service: stage the DAQ's files and warm the edge's workers
(so start-up never lands inside a figure), play the schedule (each readout's CCDs in one
``submit_many``), collect every CCD's outcome, measure CPU by role. The edge service's threads
run in this process, which end to end is also the facility side: their CPU is ``edge_service``,
taken out of ``facility_process``.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from obsingest import defaults
from obsingest.logs import get_logger, log_event
from producers.transfer import cpu, stats
from producers.transfer.ccdcache import INSTRUMENT, ensure_ccd_files
from producers.transfer.harness import Arrivals, EndToEnd, HarnessConfig, HarnessResult
from producers.transfer.plan import (
    compress_threads,
    edge_workers,
    exposure_ids,
    parse_destination,
    readout_times,
)
from producers.transfer.staging import remove_staged, stage_run

log = get_logger("obsingest.producer.transfer")

#: the exposure's manifest is published this long before its readout, as the camera does
MANIFEST_LEAD = timedelta(seconds=1)


def run_harness(
    config: HarnessConfig,
    end_to_end: EndToEnd | None = None,
    progress: Callable[[str, bool], None] | None = None,
    services: dict[str, list[int]] | None = None,
) -> HarnessResult:
    """Run the whole measurement; raises if the edge cannot start or CCDs never come back.
    ``services``: role -> pids of the processes serving the run, for the CPU-by-role report."""
    return Run(config, end_to_end, progress or (lambda _text, _final: None), services or {}).run()


class Run:
    def __init__(
        self,
        config: HarnessConfig,
        end_to_end: EndToEnd | None,
        show: Callable[[str, bool], None],
        services: dict[str, list[int]],
    ) -> None:
        if not 1 <= config.ccds <= 189:
            raise ValueError("--ccds must be 1..189 (LSSTCam science detectors)")
        if config.numexp < 1:
            raise ValueError("--numexp must be >= 1")
        if config.workers is not None and config.workers < 1:
            raise ValueError("--workers must be >= 1")
        self.config = config
        self.e2e = end_to_end
        self.show = show
        self.services = services
        self.dest = parse_destination(config.destination)
        self.run_dir = config.run_dir.resolve()
        self.run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.log_path = self.run_dir / "logs" / f"transfer-{self.run_id}.jsonl"
        self.detectors = list(range(config.ccds))
        cpus = os.cpu_count() or 1
        self.workers = config.workers or edge_workers(config.ccds, cpus)
        self.threads = config.threads or compress_threads(self.workers, cpus)
        self.exposures = exposure_ids(config.starttime or datetime.now(UTC), config.numexp)
        self.sender_url, self.prefix = self.dest.sender_url, self.dest.prefix
        self.quarantine = defaults.QUARANTINE_PREFIX
        if end_to_end is not None:
            self.sender_url, self.prefix = end_to_end.sender_url, end_to_end.prefix
            self.quarantine = end_to_end.quarantine_prefix
        self.handoff = self.run_dir / "handoff" / self.run_id
        self.spool = self.run_dir / "spool" / self.run_id
        _remove_dead_runs(self.run_dir)
        self.arrivals = Arrivals(set(self.exposures))
        self.records: list[stats.TransferRecord] = []
        self.errors: list[str] = []
        self._done: queue.Queue[tuple[int, int, Future[Any]]] = queue.Queue()
        self._submit_cpu = 0.0
        self._log: TextIO | None = None
        #: CPU samples at each readout and when each exposure is complete (see ``phases``)
        self._roles: dict[str, list[int]] = {}
        self._tids: list[int] = []
        self._marks: list[tuple[str, int, float, cpu.CpuSample, float]] = []
        self._completed: set[int] = set()

    def run(self) -> HarnessResult:
        from producers.edge import EdgeService, EdgeSettings

        config = self.config
        settings = EdgeSettings(
            destination=self.sender_url,
            prefix=self.prefix,
            quarantine_prefix=self.quarantine,
            spool=self.spool,
            workers=self.workers,
            threads=self.threads,
            health_port=-1,
            min_free_bytes=0,
            budget_seconds=config.budget,
        )
        edge = EdgeService(settings, log_level="WARNING")
        finished = False
        try:
            staged = self._stage()
            self._log = self.log_path.open("a", buffering=1)
            if self.e2e is not None:
                self.e2e.start(self.arrivals)
            self.show(f"starting {self.workers} edge workers ...", False)
            edge.start()
            assert edge.pool is not None
            pids = edge.pool.pids()
            self.show(f"starting {self.workers} edge workers: all warm", True)
            start = config.starttime or datetime.now(UTC) + timedelta(seconds=config.lead_seconds)
            if start <= datetime.now(UTC):
                raise ValueError(f"start time {start.isoformat()} is already past")
            log_event(
                log,
                "transfer.run.start",
                run_id=self.run_id,
                start=start.isoformat(),
                **{k: getattr(config, k) for k in ("ccds", "numexp", "interval", "compress")},
                sender_url=self.sender_url,
                workers=self.workers,
                threads=self.threads,
            )
            roles = {
                "edge_workers": pids,
                # before facility_process: a pid counts under the first role whose tree has it
                **(self.e2e.processes() if self.e2e is not None else {}),
                "facility_process": [os.getpid()],
                **self.services,
            }
            self._roles, self._tids = roles, _edge_threads(edge)
            self._mark("start", -1)
            readouts = readout_times(start, config.interval, config.numexp)
            self._play(edge, staged, readouts, {pid: i for i, pid in enumerate(pids)})
            if self.e2e is not None:
                self._wait_announced()
            self._mark("end", -1)
            used = self._delta(self._marks[0], self._marks[-1])
            window = self._marks[-1][2] - self._marks[0][2]
            crashes = edge.counts().get("worker_crashes", 0)
            if crashes:
                self.errors.append(f"{crashes} edge worker(s) crashed (the CCDs were retried)")
            finished = True
        finally:
            edge.stop(timeout=30 if finished else 5)
            if self.e2e is not None:
                self.e2e.close()
            if self._log is not None:
                self._log.close()
            remove_staged(self.handoff)
            shutil.rmtree(self.spool, ignore_errors=True)
        self.records.sort(key=lambda r: (r.exposure_index, r.detector))
        result = HarnessResult(
            config=config,
            run_id=self.run_id,
            sender_url=self.sender_url,
            start=start,
            exposures=self.exposures,
            records=self.records,
            arrivals=self.arrivals.all(),
            end_to_end=self.e2e is not None,
            worker_errors=self.errors,
            log_path=self.log_path,
            cpu_seconds=used,
            window_seconds=window,
            workers=self.workers,
            threads=self.threads,
            staging_seconds=self._staging_seconds,
            cpu_phases=self.phases(),
        )
        log_event(
            log,
            "transfer.run.done",
            run_id=self.run_id,
            transfers=len(self.records),
            failed=sum(not r.ok for r in self.records),
            announced=len(result.arrivals),
        )
        return result

    _staging_seconds = 0.0

    def _stage(self) -> list[dict[int, Path]]:
        """The cache (once per size), then every exposure's files, as the DAQ writes them."""
        config = self.config

        def cache_progress(done: int, total: int) -> None:
            self.show(f"generating {config.ccd_size} CCD files in the cache: {done}/{total}", done == total)

        paths = ensure_ccd_files(
            self.run_dir / "cache", config.ccd_size, self.detectors, progress=cache_progress
        )
        sources = {d: paths[d][0] if config.compress else paths[d][1] for d in self.detectors}

        def stage_progress(done: int, total: int) -> None:
            self.show(f"DAQ writing every exposure's CCD files: {done}/{total} exposures", done == total)

        t0 = time.monotonic()
        staged = stage_run(
            sources,
            self.handoff,
            INSTRUMENT,
            self.exposures,
            compressed=not config.compress,
            progress=stage_progress,
        )
        self._staging_seconds = time.monotonic() - t0
        return staged

    def _play(
        self, edge: Any, staged: list[dict[int, Path]], readouts: list[datetime], workers: dict[int, int]
    ) -> None:
        """Hand each exposure to the edge at its readout; collect outcomes until all are in."""
        from producers.edge import CcdFile

        config = self.config
        expected = config.ccds * config.numexp
        announced = 0
        deadline = readouts[-1] + timedelta(seconds=120 + 5 * config.ccds)
        for index, readout in enumerate(readouts):
            while (now := datetime.now(UTC)) < readout:
                announced = self._announce(announced, readouts, now)
                self._collect(min(0.05, (readout - now).total_seconds()), readouts, workers)
            exposure = self.exposures[index]
            ccds = [CcdFile(str(staged[index][d]), INSTRUMENT, exposure, d, readout) for d in self.detectors]
            t0 = time.thread_time()
            futures = edge.submit_many(ccds)
            self._submit_cpu += time.thread_time() - t0
            # after the hand-off: reading /proc takes tens of ms of wall time on a busy machine
            self._mark("readout", index)
            for ccd, future in zip(ccds, futures, strict=True):
                self._line("transfer.start", data_id=ccd.data_id.key, readout=readout.isoformat())
                future.add_done_callback(lambda f, i=index, d=ccd.detector: self._done.put((i, d, f)))
        while len(self.records) < expected:
            announced = self._announce(announced, readouts, datetime.now(UTC))
            if datetime.now(UTC) > deadline:
                raise TimeoutError(f"only {len(self.records)}/{expected} transfers by {deadline}")
            if edge.state == "stopped":
                raise RuntimeError(f"the edge stopped after {len(self.records)}/{expected}")
            self._collect(0.05, readouts, workers)

    def _wait_announced(self) -> None:
        """Until every CCD that was sent is announced (or the timeout); show the count."""
        expected = sum(r.ok for r in self.records)
        deadline = time.monotonic() + self.config.arrival_timeout
        while self.arrivals.count() < expected and time.monotonic() < deadline:
            self.show(f"waiting for announcements: {self.arrivals.count()}/{expected}", False)
            self._check_complete()
            time.sleep(0.05)
        self._check_complete()
        self.show(f"announced: {self.arrivals.count()}/{expected}", True)

    def _mark(self, kind: str, index: int) -> None:
        service = cpu.thread_seconds(os.getpid(), self._tids) + self._submit_cpu
        self._marks.append((kind, index, time.monotonic(), cpu.sample(self._roles), service))

    def _delta(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> dict[str, float]:
        return _split_edge_service(cpu.delta_seconds(a[3], b[3]), b[4] - a[4])

    def _check_complete(self) -> None:
        """Mark each exposure complete once all its CCDs are back (and, end to end, announced)."""
        for index, exposure in enumerate(self.exposures):
            if index in self._completed:
                continue
            mine = [r for r in self.records if r.exposure_index == index]
            if len(mine) < self.config.ccds:
                return
            if self.e2e is not None and self.arrivals.count(exposure) < sum(r.ok for r in mine):
                return
            self._completed.add(index)
            self._mark("complete", index)

    def phases(self) -> list[dict[str, Any]]:
        """Per exposure: CPU seconds by role while ``busy`` (readout -> its last CCD back or
        announced) and ``idle`` (-> the next readout), for ``capacity``."""
        at = {(m[0], m[1]): m for m in self._marks}
        out = []
        for index in range(len(self.exposures)):
            readout, done = at.get(("readout", index)), at.get(("complete", index))
            if readout is None or done is None:
                continue
            phase: dict[str, Any] = {
                "index": index,
                "busy_seconds": round(done[2] - readout[2], 3),
                "busy": {k: round(v, 3) for k, v in self._delta(readout, done).items()},
            }
            following = at.get(("readout", index + 1))
            if following is not None and following[2] > done[2]:
                phase["idle_seconds"] = round(following[2] - done[2], 3)
                phase["idle"] = {k: round(v, 3) for k, v in self._delta(done, following).items()}
            out.append(phase)
        return out

    def _announce(self, announced: int, readouts: list[datetime], now: datetime) -> int:
        """Publish each exposure's manifest shortly before its readout (end to end)."""
        while (
            self.e2e is not None and announced < len(readouts) and readouts[announced] - MANIFEST_LEAD <= now
        ):
            self.e2e.announce_exposure(
                self.exposures[announced], self.detectors, readouts[announced] - timedelta(seconds=15)
            )
            announced += 1
        return announced

    def _collect(self, timeout: float, readouts: list[datetime], workers: dict[int, int]) -> None:
        block = True
        while True:
            try:
                index, detector, future = self._done.get(block, max(0.0, timeout))
            except queue.Empty:
                break
            block = False  # then whatever else is in, without waiting
            outcome = future.result() if not future.cancelled() else None
            if outcome is None:
                raise RuntimeError(f"the edge dropped exposure {index} detector {detector}")
            record = stats.record_of(
                outcome, detector, self.exposures[index], index, readouts[index], workers
            )
            self.records.append(record)
            self._line(
                "transfer.done" if record.ok else "transfer.failed",
                seconds=round(record.seconds, 4),
                send_seconds=round(record.send_seconds, 4),
                **record.to_json(),
            )
            self._progress(index)
        self._check_complete()

    def _progress(self, current: int) -> None:
        """One line per exposure: rewritten while it runs, kept when all its CCDs are sent."""
        ccds, sent = self.config.ccds, [r for r in self.records if r.ok]
        this = [r for r in sent if r.exposure_index == current]
        text = (
            f"exposure {current + 1}/{len(self.exposures)}: sent {len(this)}/{ccds}"
            f" (all: {len(sent)}/{ccds * len(self.exposures)}, failed {len(self.records) - len(sent)})"
        )
        if self.e2e is not None:
            text += f", announced {self.arrivals.count()}"
        if this:
            text += f", max {max(r.seconds for r in this):.2f} s"
        self.show(text, sum(r.exposure_index == current for r in self.records) == ccds)

    def _line(self, event: str, **fields: Any) -> None:
        """One JSON line per transfer event in the run's log (data id, start, end)."""
        if self._log is not None:
            stamp = datetime.now(UTC).isoformat()
            self._log.write(json.dumps({"ts": stamp, "event": event, "run_id": self.run_id, **fields}) + "\n")


def _remove_dead_runs(run_dir: Path) -> None:
    """The hand-off and spool directories of runs whose process is gone: a run killed (SIGKILL,
    the OOM killer) never reached its ``finally``, and left its staged CCDs behind for good."""
    for path in [*run_dir.glob("handoff/*-*"), *run_dir.glob("spool/*-*")]:
        pid = path.name.rpartition("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _edge_threads(edge: Any) -> list[int]:
    """Native ids of the edge service's own threads in this process (engine, result collector)."""
    threads = [edge._engine, getattr(edge.pool, "_collector", None)]
    return [t.native_id for t in threads if t is not None and t.native_id is not None]


def _split_edge_service(used: dict[str, float], service: float) -> dict[str, float]:
    """Move the edge service's own CPU (threads of this process) out of facility_process."""
    out = dict(used)
    service = min(service, out.get("facility_process", 0.0))
    out["facility_process"] = out.get("facility_process", 0.0) - service
    first = {"edge_workers": out.pop("edge_workers", 0.0), "edge_service": service}
    return {**first, **out}
