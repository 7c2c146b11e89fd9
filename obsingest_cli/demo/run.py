"""The demo (``obsingest demo``): DESIGN.md's whole flow on one machine, on embedded defaults.

DAQ simulator -> edge service -> finalize notifications -> register function -> registry ->
ArrivalEvents -> Beam batch job -> summaries, table and latency plot."""

from __future__ import annotations

import json
import shutil
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from obsingest import avro, defaults, logs
from obsingest.dataid import INSTRUMENTS, DataId, make_exposure_id
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary, utcnow
from obsingest_cli.demo.record_check import discrepancy

if TYPE_CHECKING:
    from obsingest_cli.demo.environment import DemoEnvironment

FILTERS = ("u", "g", "r", "i", "z", "y")
#: Seconds of every demo exposure (the camera's 15 s snap).
EXPOSURE_TIME = 15.0
OUTPUTS = (
    "registry.sqlite3",
    "registry.sqlite3-wal",
    "registry.sqlite3-shm",
    "store",
    "daq",
    "arrivals.avro",
    "manifests.avro",
    "summaries.jsonl",
    "latency.png",
    "focal_plane.png",
    "demo.log",
    "ship.jsonl",
    "edge.jsonl",
    "edge-spool",
)


@dataclass
class DemoConfig:
    exposures: int = 3
    detectors: int = 9
    ccd_size: Literal["full", "small"] = "full"
    workdir: Path = Path("demo-output")
    instrument: str = "LSSTComCam"
    workers: int = 2
    seed: int = 0
    interval: float = 0.0
    budget: float = defaults.BUDGET_SECONDS
    inject_bad: bool = False
    stack: str = "embedded"
    transport: str = "direct"
    day_obs: int | None = None
    #: registry URL for the embedded stack (default: SQLite in the workdir); butler:<repo> too
    registry: str | None = None


@dataclass
class DemoResult:
    registered: int
    summaries: list[ExposureSummary]
    arrivals: list[ArrivalEvent]
    quarantined: list[dict]
    dead_lettered: int
    #: what the run wrote and where: registry URL, store URL, files
    outputs: dict[str, str] = field(default_factory=dict)
    #: why what was announced differs from what the registry (the Butler) holds; "" if it does not
    discrepancy: str = ""

    @property
    def complete(self) -> bool:
        return bool(self.summaries) and all(s.completeness == 1.0 for s in self.summaries)

    @property
    def announced(self) -> int:
        return len({a.dataset_id for a in self.arrivals})


class Progress:
    """One status line per stage, rewritten in place on a terminal, appended otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()

    def update(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        elif final:
            self.stream.write(text + "\n")
        self.stream.flush()


def check_options(config: DemoConfig) -> None:
    """ValueError naming the option that cannot be run (as given, or with another)."""
    if config.instrument not in INSTRUMENTS:
        raise ValueError(f"--instrument {config.instrument!r}: one of {', '.join(INSTRUMENTS)}")
    count = INSTRUMENTS[config.instrument]
    if not 1 <= config.detectors <= count:
        raise ValueError(f"--detectors must be 1..{count} for {config.instrument}")
    if config.registry and config.stack != "embedded":
        raise ValueError("--registry applies to the embedded stack only")


class DemoPipeline:
    def __init__(self, config: DemoConfig, progress: Progress | None = None) -> None:
        self.config = config
        self.progress = progress or Progress()
        check_options(config)
        self.workdir = config.workdir.resolve()
        #: appended to by the environment's subscriber threads (list.append is atomic)
        self.arrivals: list[ArrivalEvent] = []
        self.manifests: list[ExposureManifest] = []

    def _reset_workdir(self) -> None:
        """Start from nothing so '27 CCDs registered exactly once' is about this run only."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            path = self.workdir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def run(self) -> DemoResult:
        from multiprocessing import get_context

        from obsingest_cli.demo.by_name import make_environment, make_transport
        from producers.edge import EdgeService, EdgeSettings

        cfg = self.config
        self._reset_workdir()
        log_file = (self.workdir / "demo.log").open("a")
        logs.configure(stream=log_file)
        env = make_environment(cfg.stack, self.workdir, registry_url=cfg.registry)
        transport = make_transport(cfg.transport, env)
        day_obs = cfg.day_obs or int(datetime.now(UTC).strftime("%Y%m%d"))
        edge_log = (self.workdir / "edge.jsonl").open("w")
        settings = EdgeSettings(
            destination=transport.sender_url,
            prefix=env.store_settings.prefix,
            quarantine_prefix=env.store_settings.quarantine_prefix,
            spool=self.workdir / "edge-spool",
            workers=cfg.workers,
            health_port=-1,
            min_free_bytes=0,
            budget_seconds=cfg.budget,
        )
        try:
            env.start(self.arrivals.append, self.manifests.append)
            transport.start()
            self.progress.update(f"starting {cfg.workers} edge workers ...")
            # the DAQ simulator's own processes write the raw CCDs; the edge service takes them
            with (
                EdgeService(settings, log_level="WARNING") as edge,
                ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn")) as daq,
            ):
                for index in range(cfg.exposures):
                    exposure = make_exposure_id(day_obs, index + 1)
                    self._run_exposure(daq, edge, env, exposure, day_obs, index, edge_log)
                    if cfg.inject_bad and index == 0:
                        from obsingest_cli.demo.faults import inject_bad_inputs

                        inject_bad_inputs(env, DataId(cfg.instrument, exposure, 0))
                    if cfg.interval and index + 1 < cfg.exposures:
                        time.sleep(cfg.interval)
            self.progress.update("waiting for the last registrations ...")
            transport.finish(timeout=120)
            dead_lettered = env.finish(timeout=120)
            result = self._summarize(env, dead_lettered)
        finally:
            edge_log.close()
            transport.close()
            env.close()
            log_file.close()
        return result

    def _run_exposure(
        self,
        daq: ProcessPoolExecutor,
        edge: Any,
        env: DemoEnvironment,
        exposure: int,
        day_obs: int,
        index: int,
        edge_log: TextIO,
    ) -> None:
        from producers.daq.manifest import exposure_manifest
        from producers.daq.simulator import CcdSpec, write_raw_ccd
        from producers.edge import CcdFile

        cfg = self.config
        label = f"exposure {index + 1}/{cfg.exposures} ({exposure})"
        detectors = list(range(cfg.detectors))
        band = FILTERS[index % len(FILTERS)]
        # Integration began dark_time before now (the readout): the headers say both instants in
        # TAI, as the camera does; the manifest and the edge use the same instants in UTC.
        now = utcnow()
        size = cfg.ccd_size
        specs = [
            CcdSpec(cfg.instrument, exposure, d, day_obs, now, EXPOSURE_TIME, band, size, cfg.seed)
            for d in detectors
        ]
        obs_start = now - timedelta(seconds=specs[0].dark_time)
        specs = [replace(spec, obs_start=obs_start) for spec in specs]
        manifest = exposure_manifest(
            cfg.instrument, exposure, day_obs, obs_start, EXPOSURE_TIME, band, detectors
        )
        env.publish_manifest(manifest)
        edge.submit_manifest(manifest)
        # the camera's names: <day_obs>/<obs_id>/<obs_id>_<raft>_<sensor>.fits
        raw_dir = self.workdir / "daq" / str(day_obs) / specs[0].identity.obs_id
        paths = {spec.detector: raw_dir / spec.file_name for spec in specs}
        futures = [daq.submit(write_raw_ccd, s, paths[s.detector]) for s in specs]
        for done, fut in enumerate(futures, 1):
            fut.result()
            self.progress.update(f"{label}: DAQ wrote {done}/{len(specs)} raw CCDs")
        # The camera reads every CCD of an exposure out at once: one readout time for all, and
        # the whole readout handed to the edge service in one call (journalled in one commit).
        readout = utcnow()
        ccds = [CcdFile(str(paths[det]), cfg.instrument, exposure, det, readout) for det in detectors]
        outcomes = edge.submit_many(ccds)
        for done, fut in enumerate(outcomes, 1):
            outcome = _await_outcome(fut, edge)
            record = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(outcome).items()}
            edge_log.write(json.dumps(record) + "\n")
            if not outcome.ok:
                raise RuntimeError(f"edge: {outcome.key} {outcome.state}: {outcome.error}")
            self.progress.update(f"{label}: compressed and stored {done}/{len(ccds)}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            arrived = {a.detector for a in self.arrivals if a.exposure == exposure}
            self.progress.update(f"{label}: registered and announced {len(arrived)}/{len(detectors)}")
            if len(arrived) >= len(detectors):
                break
            time.sleep(0.05)
        self.progress.update(f"{label}: {len(arrived)}/{len(detectors)} CCDs announced", final=True)

    def _summarize(self, env: DemoEnvironment, dead_lettered: int) -> DemoResult:
        from beam_jobs.report import plot_focal_plane, plot_latency
        from beam_jobs.summarize import run_batch

        arrivals_path = self.workdir / "arrivals.avro"
        manifests_path = self.workdir / "manifests.avro"
        avro.write_container(arrivals_path, "ArrivalEvent", [a.to_record() for a in self.arrivals])
        avro.write_container(manifests_path, "ExposureManifest", [m.to_record() for m in self.manifests])
        self.progress.update("Beam batch job: per-exposure latency and completeness ...")
        summaries_path = self.workdir / "summaries.jsonl"
        summaries = run_batch(
            [str(arrivals_path)], [str(manifests_path)], str(summaries_path), budget=self.config.budget
        )
        self.progress.update("Beam batch job: done", final=True)
        plot_path = self.workdir / "latency.png"
        plot_latency(self.arrivals, self.config.budget, plot_path)
        focal_plane = self.workdir / "focal_plane.png"
        if summaries:  # the last exposure, every detector of the camera in its place
            last = max(summaries, key=lambda s: (s.exposure, s.revision))
            plot_focal_plane(last, self.arrivals, focal_plane)
        registry = env.registry
        exposures = [(m.instrument, m.exposure) for m in self.manifests]
        return DemoResult(
            discrepancy=discrepancy(registry, exposures, self.arrivals),
            registered=registry.count_datasets(),
            summaries=summaries,
            arrivals=list(self.arrivals),
            quarantined=registry.quarantined(),
            dead_lettered=dead_lettered,
            outputs={
                "registry": registry.engine.url.render_as_string(hide_password=True),
                "store": env.store_url,
                "arrivals": str(arrivals_path),
                "manifests": str(manifests_path),
                "summaries": str(summaries_path),
                "plot": str(plot_path),
                "focal plane": str(focal_plane),
                "log": str(self.workdir / "demo.log"),
            },
        )


def run_demo(config: DemoConfig) -> int:
    """Run the demo, print the per-exposure table, what was quarantined and where everything
    is; 0 when every exposure is complete and nothing was dead-lettered."""
    from beam_jobs.core import LATENCY_SCALE
    from beam_jobs.report import format_summary_table

    try:
        check_options(config)
    except ValueError as exc:  # a usage error, as argparse's
        print(f"obsingest demo: {exc}", file=sys.stderr)
        return 2
    try:
        result = DemoPipeline(config).run()
    except (OSError, MemoryError) as exc:  # the workdir's disk full: name it (exit 75)
        from obsingest.exhaustion import as_exhausted

        where = getattr(exc, "filename", None) or config.workdir.resolve()
        exhausted = as_exhausted(exc, "disk", str(where))
        if exhausted is None:
            raise
        raise exhausted from exc
    print(format_summary_table(result.summaries))
    print(f"(latencies: readout -> announced, in seconds of {LATENCY_SCALE})")
    print()
    print(f"registered datasets: {result.registered}")
    print(f"announced CCDs:      {result.announced}")
    if result.discrepancy:
        print(f"NOT CONSISTENT: {result.discrepancy}")
    print(f"quarantined inputs:  {len(result.quarantined)}")
    for entry in result.quarantined:
        print(f"  - {entry['reason']}: {entry['message']}")
    if result.dead_lettered:
        print(f"dead-lettered notifications: {result.dead_lettered}")
    for label, path in result.outputs.items():
        print(f"{label:>10}: {path}")
    ok = result.complete and not result.dead_lettered and not result.discrepancy
    return 0 if ok else 1


#: how long the demo waits while the edge reports a resource run out (its destination or spool
#: disk full, ...) before it gives up with the one line naming it (exit 75); the edge service
#: itself waits for as long as the outage lasts
GIVE_UP_EXHAUSTED_SECONDS = 20.0


def _await_outcome(future: Future[Any], edge: Any, timeout: float = 600.0) -> Any:
    """The CCD's outcome; the edge's ResourceExhausted (or SpoolFull) once it has lasted
    ``GIVE_UP_EXHAUSTED_SECONDS``: a demo on a full disk fails in seconds, not after 600."""
    from producers.edge.errors import SpoolFull

    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=0.5)
        except TimeoutError:
            pass
        now = time.monotonic()
        if edge.exhausted is not None and now - edge.exhausted_since > GIVE_UP_EXHAUSTED_SECONDS:
            raise edge.exhausted
        if edge.refusal.refusing_for() > GIVE_UP_EXHAUSTED_SECONDS:
            raise SpoolFull(f"the edge refuses new work: {edge.refusal.reason}")
        if now > deadline:
            raise TimeoutError(f"no outcome for a CCD after {timeout:.0f} s")
