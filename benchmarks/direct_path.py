"""Per-stage latency of the direct-upload path on the local stack, with full-size CCDs.

DAQ simulator to ArrivalEvent subscriber (relay pushing in-process to ``on_push``, PostgreSQL
registry); all CCDs of an exposure are read out at once, the worst case for the last.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
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


class DirectPath:
    """One isolated deployment of the path on the stack: own project, bucket and database."""

    def __init__(self, admin_url: str) -> None:
        from infra.local.provision import create_database
        from obsingest.bus.pubsub import PubSubPublisher
        from obsingest.registry import Registry
        from obsingest.settings import BusSettings, RegistrySettings
        from obsingest.store.gcs import GcsSettings, GcsStore

        run_id = uuid.uuid4().hex[:10]
        self.project = f"bench-direct-{run_id}"
        self.bucket = f"bench-direct-{run_id}"
        os.environ["OBSINGEST_GCS_PROJECT"] = self.project  # for the spawned edge workers
        self.bus = BusSettings(backend="pubsub", pubsub_project=self.project)
        self.registry_url = create_database(admin_url, "bench_direct")
        self.admin_url = admin_url
        self.registry = Registry.open(RegistrySettings(url=self.registry_url))
        self.store = GcsStore(self.bucket, settings=GcsSettings(project=self.project))
        self.publisher = PubSubPublisher(self.project)
        self.received: dict[str, tuple[Any, datetime]] = {}
        self._lock = threading.Lock()
        self.relay: Any = None
        self.subscriber: Any = None

    def _on_arrival(self, delivery: Any) -> None:
        from obsingest.messages import ArrivalEvent, utcnow

        now = utcnow()
        event = ArrivalEvent.decode(delivery.data)
        with self._lock:
            self.received.setdefault(str(event.dataset_id), (event, now))

    def start(self) -> None:
        from functions.register import main as register_function
        from functions.register import wiring
        from infra.local.provision import setup, subscribe
        from infra.local.relay import InProcessTarget, RelaySettings
        from infra.local.relay.wiring import build_relay
        from obsingest.bus.pull import SubscriberThread
        from obsingest.settings import StoreSettings

        setup(self.bucket, self.bus, storage_client=self.store.client)
        subscribe(self.project, self.bus.arrivals_topic, "bench-arrivals")
        self.subscriber = SubscriberThread(self.project, "bench-arrivals", self._on_arrival)
        self.subscriber.start()
        wiring.configure(
            wiring.build_service(self.store, self.registry, self.publisher, StoreSettings(), self.bus)
        )
        self.relay = build_relay(
            RelaySettings(min_backoff=0.0, max_backoff=2.0, concurrency=4),
            self.bus,
            target=InProcessTarget(register_function.on_push),
        )
        self.relay.start()

    def close(self) -> None:
        from functions.register import wiring

        if self.relay is not None:
            self.relay.stop()
        if self.subscriber is not None:
            self.subscriber.stop()
        wiring.configure(None)
        self.publisher.close()
        self.registry.close()
        self._delete_run_data()

    def _delete_run_data(self) -> None:
        """Leave nothing behind: objects and bucket, database, Pub/Sub topics/subscriptions."""
        from infra.local.provision import drop_database
        from obsingest_cli.demo.local_stack import delete_pubsub_project

        if self.store.client.lookup_bucket(self.bucket) is not None:
            drop_bucket(self.store.client, self.bucket)
        drop_database(self.admin_url, self.registry_url)
        delete_pubsub_project(self.project)


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
    path = DirectPath(env["OBSINGEST_REGISTRY_URL"])
    day_obs = int(datetime.now(UTC).strftime("%Y%m%d"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-direct-"))
    ship_seconds: list[float] = []
    settings = EdgeSettings(
        destination=path.store.uri(""), spool=tmp / "spool", workers=workers, health_port=-1, min_free_bytes=0
    )
    try:
        path.start()
        with (
            EdgeService(settings, log_level="WARNING") as edge,
            ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as daq,
        ):
            for index in range(exposures):
                exposure = make_exposure_id(day_obs, 500 + index)
                raw_dir = tmp / str(exposure)
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
                while len(path.received) < (index + 1) * detectors:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {len(path.received)} arrivals after 120 s")
                    time.sleep(0.02)
                shutil.rmtree(raw_dir)
        registered = path.registry.count_datasets()
        samples = [stage_samples(e, received) for e, received in path.received.values()]
    finally:
        path.close()
        shutil.rmtree(tmp, ignore_errors=True)
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
        "dead_lettered": path.relay.counts()["dead_lettered"] if path.relay else None,
    }
    save_result("direct_path", result)
    return result


if __name__ == "__main__":
    show = ("ccds", "over_budget", "stages")
    sys.exit(cli(run, lambda r: json.dumps({k: r[k] for k in show}, indent=2), workers=os.cpu_count() or 2))
