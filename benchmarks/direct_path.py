"""Per-stage latency of the direct-upload path on the local stack, with full-size CCDs.

DAQ simulator to ArrivalEvent subscriber (relay pushing in-process to ``on_push``, PostgreSQL
registry); all CCDs of an exposure are read out at once, the worst case for the last.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import cli, drop_bucket, run_header, save_result, stack_env
from obsingest.registry.completeness import percentile

INSTRUMENT = "LSSTComCam"
BUDGET_SECONDS = 5.0
#: stage -> the ArrivalEvent's timestamps it runs between (``received``: the subscriber's receipt)
STAGES = {
    "compress": ("readout_time", "compressed_time"),
    "store": ("compressed_time", "stored_time"),
    "register": ("stored_time", "registered_time"),
    "publish": ("registered_time", "published_time"),
    "receive": ("published_time", "received"),
    "total": ("readout_time", "received"),
}


def summarize(samples: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(samples, 50), 4),
        "p95": round(percentile(samples, 95), 4),
        "max": round(max(samples), 4),
    }


def stage_samples(arrival: Any, received: datetime) -> dict[str, float]:
    times = {**vars(arrival), "received": received}
    return {stage: (times[end] - times[start]).total_seconds() for stage, (start, end) in STAGES.items()}


@contextlib.contextmanager
def deployment(admin_url: str) -> Iterator[tuple[Any, Any, Any, dict[str, tuple[Any, datetime]]]]:
    """One isolated deployment of the path on the stack (own project, bucket and database), removed
    at the end: (store, registry, relay, dataset id -> (ArrivalEvent, the subscriber's receipt))."""
    from functions.register import main as register_function
    from functions.register import wiring
    from infra.local.provision import create_database, drop_database, setup, subscribe
    from infra.local.relay import InProcessTarget, RelaySettings
    from infra.local.relay.wiring import build_relay
    from obsingest.bus.pubsub import PubSubPublisher
    from obsingest.bus.pull import SubscriberThread
    from obsingest.messages import ArrivalEvent, utcnow
    from obsingest.registry import Registry
    from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
    from obsingest.store.gcs import GcsSettings, GcsStore
    from obsingest_cli.demo.local_stack import delete_pubsub_project

    project = bucket = f"bench-direct-{uuid.uuid4().hex[:10]}"
    os.environ["OBSINGEST_GCS_PROJECT"] = project  # for the spawned edge workers
    bus = BusSettings(backend="pubsub", pubsub_project=project)
    received: dict[str, tuple[Any, datetime]] = {}
    lock = threading.Lock()

    def on_arrival(delivery: Any) -> None:
        now = utcnow()
        event = ArrivalEvent.decode(delivery.data)
        with lock:
            received.setdefault(str(event.dataset_id), (event, now))

    def drop_run_bucket() -> None:
        if store.client.lookup_bucket(bucket) is not None:
            drop_bucket(store.client, bucket)

    with contextlib.ExitStack() as stack:  # leaves nothing behind, whatever was made
        registry_url = create_database(admin_url, "bench_direct")
        stack.callback(drop_database, admin_url, registry_url)
        store = GcsStore(bucket, settings=GcsSettings(project=project))
        stack.callback(drop_run_bucket)
        stack.callback(delete_pubsub_project, project)
        registry = stack.enter_context(contextlib.closing(Registry.open(RegistrySettings(url=registry_url))))
        publisher = stack.enter_context(contextlib.closing(PubSubPublisher(project)))
        setup(bucket, bus, storage_client=store.client)
        subscribe(project, bus.arrivals_topic, "bench-arrivals")
        stack.callback(SubscriberThread(project, "bench-arrivals", on_arrival).start().stop)
        wiring.configure(wiring.build_service(store, registry, publisher, StoreSettings(), bus))
        stack.callback(wiring.configure, None)
        relay = build_relay(
            RelaySettings(min_backoff=0.0, max_backoff=2.0, concurrency=4),
            bus,
            target=InProcessTarget(register_function.on_push),
        ).start()
        stack.callback(relay.stop)
        yield store, registry, relay, received


def run(exposures: int = 2, detectors: int = 9, workers: int = 2) -> dict[str, Any]:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from obsingest.dataid import make_exposure_id
    from obsingest.messages import utcnow
    from producers.daq.simulator import CcdSpec, write_raw_ccd
    from producers.edge import CcdFile, EdgeService, EdgeSettings

    env = stack_env("pubsub", "gcs", "postgres")
    for key in ("PUBSUB_EMULATOR_HOST", "STORAGE_EMULATOR_HOST"):
        os.environ[key] = env[key]
    day_obs = int(datetime.now(UTC).strftime("%Y%m%d"))
    ship_seconds: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-direct-", ignore_cleanup_errors=True) as tmp,
        deployment(env["OBSINGEST_REGISTRY_URL"]) as (store, registry, relay, received),
    ):
        settings = EdgeSettings(
            destination=store.uri(""),
            spool=Path(tmp) / "spool",
            workers=workers,
            health_port=-1,
            min_free_bytes=0,
        )
        with (
            EdgeService(settings, log_level="WARNING") as edge,
            ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as daq,
        ):
            for index in range(exposures):
                exposure = make_exposure_id(day_obs, 500 + index)
                raw_dir = Path(tmp) / str(exposure)
                obs_start = utcnow()
                specs = [
                    CcdSpec(INSTRUMENT, exposure, d, day_obs, obs_start, 15.0, "r", "full")
                    for d in range(detectors)
                ]
                paths = [raw_dir / s.file_name for s in specs]  # the camera's names
                list(daq.map(write_raw_ccd, specs, paths))
                readout = utcnow()
                ccds = [
                    CcdFile(str(p), INSTRUMENT, exposure, s.detector, readout)
                    for s, p in zip(specs, paths, strict=True)
                ]
                outcomes = [f.result(timeout=120) for f in edge.submit_many(ccds)]
                bad = [o for o in outcomes if not o.ok]
                if bad:
                    raise RuntimeError(f"edge: {len(bad)} CCDs not acked: {bad[0].error}")
                ship_seconds += [o.read_seconds + o.compress_seconds + o.send_seconds for o in outcomes]
                deadline = time.monotonic() + 120
                while len(received) < (index + 1) * detectors:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {len(received)} arrivals after 120 s")
                    time.sleep(0.02)
                shutil.rmtree(raw_dir)
        registered = registry.count_datasets()
        samples = [stage_samples(e, at) for e, at in received.values()]
        dead_lettered = relay.counts()["dead_lettered"]
    totals = [s["total"] for s in samples]
    result = {
        **run_header("direct_path"),
        "method": (
            f"{exposures} exposures x {detectors} full-size {INSTRUMENT} CCDs (75.6 MB raw), "
            f"the edge service with {workers} worker processes; all CCDs of an exposure read "
            "out at once; GCS and Pub/Sub emulators, PostgreSQL registry, in-process relay to "
            "on_push; seconds from the ArrivalEvent's stage timestamps and the subscriber's receipt"
        ),
        "ccds": len(samples),
        "registered": registered,
        "budget_seconds": BUDGET_SECONDS,
        "over_budget": sum(t > BUDGET_SECONDS for t in totals),
        "stages": {stage: summarize([s[stage] for s in samples]) for stage in STAGES},
        "edge_compress_plus_upload": summarize(ship_seconds),
        "dead_lettered": dead_lettered,
    }
    save_result("direct_path", result)
    return result


if __name__ == "__main__":
    show = ("ccds", "over_budget", "stages")
    sys.exit(cli(run, lambda r: json.dumps({k: r[k] for k in show}, indent=2), workers=os.cpu_count() or 2))
