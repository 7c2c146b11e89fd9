"""``obsingest bench transfer`` and ``bench capacity``'s work: the harness (``producers.transfer``)
on the demo's environments and transports, and the capacity model it calibrates."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from obsingest_cli.options import call_with_options

T = TypeVar("T")

if TYPE_CHECKING:
    from obsingest.messages import ArrivalEvent
    from obsingest_cli.demo.environment import DemoEnvironment, DemoTransport
    from producers.transfer import HarnessConfig


class EnvironmentEndToEnd:
    """The demo's environment and transport as the harness's facility side."""

    def __init__(self, env: DemoEnvironment, transport: DemoTransport) -> None:
        self.env = env
        self.transport = transport
        self.sender_url = transport.sender_url
        self.prefix = env.store_settings.prefix
        self.quarantine_prefix = env.store_settings.quarantine_prefix

    def start(self, on_arrival: Callable[[ArrivalEvent], None]) -> None:
        self.env.start(on_arrival, None)  # nobody reads the manifests back: no poller
        self.transport.start()

    def announce_exposure(self, exposure: int, detectors: list[int], obs_start: datetime) -> None:
        from obsingest.dataid import exposure_day_obs
        from obsingest.messages import ExposureManifest, utcnow

        self.env.publish_manifest(
            ExposureManifest(
                instrument="LSSTCam",
                exposure=exposure,
                day_obs=exposure_day_obs(exposure),
                detectors=detectors,
                obs_start=obs_start,
                exposure_time=15.0,
                filter="r",
                published=utcnow(),
            )
        )

    def processes(self) -> dict[str, list[int]]:
        return self.transport.processes()

    def close(self) -> None:
        try:
            self.transport.finish(timeout=30)
            self.env.finish(timeout=30)
        finally:
            self.transport.close()
            self.env.close()


def make_end_to_end(destination: str, stack: str | None, workdir: Path) -> EnvironmentEndToEnd:
    """file:// -> embedded environment in DIR; gs:// -> the local stack, direct upload;
    kafka:// -> the Kafka transport (assembler) on the chosen environment."""
    from obsingest_cli.demo.by_name import make_environment, make_transport
    from producers.transfer.plan import parse_destination

    dest = parse_destination(destination)
    if dest.scheme == "file":
        if stack == "local":
            raise ValueError("file:// is the embedded environment; use gs:// for the local stack")
        Path(dest.target).mkdir(parents=True, exist_ok=True)
        env = make_environment("embedded", Path(dest.target))
        return EnvironmentEndToEnd(env, make_transport("direct", env))
    workdir.mkdir(parents=True, exist_ok=True)
    env = make_environment(stack or "local", workdir, keep=False)
    transport = make_transport("kafka" if dest.scheme == "kafka" else "direct", env)
    return EnvironmentEndToEnd(env, transport)


def prepare_destination(destination: str) -> None:
    """Without --end-to-end nothing else creates the bucket or topic: create them if missing
    (the topic with room for whole chunks, like the Kafka transport's)."""
    from producers.transfer.plan import parse_destination

    dest = parse_destination(destination)
    if dest.scheme == "gs":
        from obsingest.store.gcs import GcsSettings, make_client

        client = make_client(GcsSettings())
        if client.lookup_bucket(dest.target) is None:
            client.create_bucket(dest.target)
    elif dest.scheme == "kafka":  # an existing topic is left as it is
        from infra.local.provision import CHUNK_TOPIC_PARTITIONS, create_chunk_topics

        bootstrap = dest.sender_url[len("kafka://") :].rsplit("/", 1)[0]
        create_chunk_topics(bootstrap, {dest.target: CHUNK_TOPIC_PARTITIONS})


def _write_json(path: Path, data: Any, indent: int | None = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")


def _logged(run_dir: Path, failed: str, work: Callable[[], T]) -> T | None:
    """``work()`` logging into RUN_DIR/bench.log; None, said on stderr, when it fails."""
    from obsingest import logs

    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "bench.log").open("a") as log_file:
        logs.configure(stream=log_file)
        try:
            return work()
        except (ValueError, RuntimeError, TimeoutError) as exc:
            print(f"error: {failed}{exc}", file=sys.stderr)
            return None


def format_report(result: dict[str, Any]) -> str:
    """The harness's printed report: warm-up, the table, and end to end where measured."""
    from producers.transfer.stats import StageRow, TransferRow, format_stage_table
    from producers.transfer.stats import format_transfer_table as table

    what = "read + compress + send" if result["compress"] else "read + send (pre-compressed)"
    lines = [
        f"{result['ccds']} CCDs x {result['numexp']} exposures every {result['interval']} s "
        f"-> {result['sender_url']} ({what}, {result['ccd_size']} CCDs; edge service, "
        f"{result.get('workers', '?')} workers x {result.get('threads', '?')} threads; the DAQ "
        f"wrote every exposure's files in {result.get('staging_seconds', 0):.1f} s before the "
        "start)",
        "",
        "first exposure (connection warm-up):",
        table([TransferRow(**result["warmup"])]) if result["warmup"] else "(none)",
        "",
        "remaining exposures:",
        table([TransferRow(**result["steady"])]) if result["steady"] else "(none: --numexp 1)",
    ]
    if result["end_to_end"]:
        lat = result["latency"]["steady"] if result["numexp"] > 1 else result["latency"]["all"]
        stages = result["stages"] if result["numexp"] > 1 else result["stages_warmup"]
        lines += ["", "end to end, per CCD (warm-up exposure excluded when there are others):"]
        lines.append(format_stage_table([StageRow(**r) for r in stages]))
        verdict = (
            "within" if lat["announced"] == lat["expected"] and not lat["over_budget"] else ("NOT within")
        )
        p50 = "-" if lat["p50"] is None else f"{lat['p50']:.2f}"
        mx = "-" if lat["max"] is None else f"{lat['max']:.2f}"
        lines.append(
            f"\nreadout -> announced: {lat['announced']}/{lat['expected']} announced, "
            f"p50 {p50} s, max {mx} s, {lat['over_budget']} over the {lat['budget']} s "
            f"budget: {verdict} budget"
        )
    cpu = result.get("cpu", {}).get("per_exposure")
    if cpu:
        roles = ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())
        lines.append(f"\nCPU seconds per exposure ({result['cpu']['cores']} cores): {roles}")
    if result["failed"]:
        failed = [r for r in result["records"] if r["error"]]
        lines.append(f"\n{result['failed']} transfers failed, e.g. {failed[0]['error']}")
    return "\n".join(lines)


def run_transfer(args: argparse.Namespace) -> int:
    """``obsingest bench transfer``: 0 when every transfer (and announcement) succeeded."""
    from producers.transfer import HarnessConfig
    from producers.transfer.plan import parse_starttime

    starttime = parse_starttime(args.starttime) if args.starttime else None
    config = call_with_options(HarnessConfig, args, starttime=starttime)
    result = _logged(args.run_dir, "", lambda: harness_json(config, args.stack, args.end_to_end))
    if result is None:
        return 1
    print(format_report(result))
    if args.json:
        _write_json(args.json, result)
        print(f"\nwritten {args.json}")
    complete = not result["failed"] and not result["worker_errors"]
    if result["end_to_end"]:
        complete = complete and result["latency"]["all"]["announced"] == args.ccds * args.numexp
    return 0 if complete else 1


def harness_json(config: HarnessConfig, stack: str | None = None, end_to_end: bool = True) -> dict[str, Any]:
    """One harness run on the stack's endpoints, its JSON."""
    from infra.local.stack import Stack
    from obsingest_cli.demo.local_stack import use_stack_environment
    from obsingest_cli.demo.run import Progress
    from producers.transfer import run_harness

    # gs:// and kafka:// without explicit endpoints talk to the local stack (as `eval "$(obsingest
    # stack env)"` would set up); variables already set win
    wanted = {"gs": ("pubsub", "gcs"), "kafka": ("kafka",)}.get(config.destination.partition("://")[0])
    if wanted:
        use_stack_environment(wanted, check=False)
    if end_to_end:
        e2e = make_end_to_end(config.destination, stack, config.run_dir / "e2e")
    else:
        e2e = None
        prepare_destination(config.destination)
    # the local stack's services a run uses, for the CPU-by-role report
    local = not config.destination.startswith("file://") or stack == "local"
    services = {r.name: [r.pid] for r in Stack().status() if r.pid} if local else {}
    return run_harness(config, e2e, Progress(sys.stderr).update, services).to_json()


#: path -> destination of its calibration runs (the local stack, as ``benchmarks/transfer.py``)
CALIBRATION_DESTINATIONS = {"direct": "gs://calibration", "kafka": "kafka://ccd-chunks"}


def calibration_runs(path: str, ccds: int, run_dir: Path) -> dict[str, Any]:
    """The two short runs the model is calibrated on: 1 CCD and ``ccds`` CCDs per exposure."""
    from producers.transfer import HarnessConfig

    destination = CALIBRATION_DESTINATIONS[path]
    one, many = (
        harness_json(HarnessConfig(destination, n, 3, interval, compress=True, run_dir=run_dir))
        # at the camera's cadence: an exposure must end before the next for its CPU to be its own
        for n, interval in ((1, 4.0), (ccds, 17.0))
    )
    return {"path": path, "one": _slim(one), "many": _slim(many)}


def _slim(result: dict[str, Any]) -> dict[str, Any]:
    keep = ("ccds", "numexp", "workers", "exposures", "cpu", "records", "arrivals", "latency")
    return {k: result[k] for k in keep if k in result}


def run_capacity(args: argparse.Namespace) -> int:
    """``obsingest bench capacity``: 0 unless the calibration failed."""
    from producers.transfer import capacity

    try:
        detectors = capacity.camera_detectors(args.camera)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.calibration and args.calibration.exists():
        runs = json.loads(args.calibration.read_text())
    else:
        runs = _logged(
            args.run_dir,
            "calibration failed: ",
            lambda: calibration_runs(args.path, args.calibration_ccds, args.run_dir),
        )
        if runs is None:
            return 1
        if args.calibration:
            _write_json(args.calibration, runs, indent=None)
    cal = capacity.calibrate(runs["path"], runs["one"], runs["many"])
    report = call_with_options(capacity.camera_report, args, cal=cal, detectors=detectors)
    here = [capacity.predict_here(cal, n) for n in args.predict]
    print(
        f"calibration ({cal.path} path, {cal.cores} cores, {cal.ccds} CCDs per exposure, "
        f"other users took {cal.background:.2f} cores): one CCD alone is announced "
        f"{cal.latency_one:.2f} s after readout; CPU seconds per CCD {cal.total_cpu:.3f}"
    )
    print("\nthis machine, CCDs read out together -> predicted max readout -> announced:")
    print("| CCDs | predicted max s | bottleneck |\n| ---: | ---: | --- |")
    for p in here:
        print(f"| {p.ccds} | {p.max_latency:.2f} | {p.bottleneck} |")
    print()
    print(capacity.format_camera(report, args.camera))
    if args.json:
        out = {"calibration": cal.to_json(), "camera": report, "here": [p.__dict__ for p in here]}
        _write_json(args.json, out)
        print(f"\nwritten {args.json}")
    return 0
