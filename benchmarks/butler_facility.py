"""A whole LSSTCam exposure at the facility into a PostgreSQL Butler (issue 20), next to
``butler ingest-files`` of the same files into a second fresh repository in the same run.

Two warm register-function processes; start-up costs far more than the handling, so it is kept
apart (``ratio`` is warm, ``ratio_cold`` adds it). Goal: the last CCD within 7 s (Rubin's
target), 205 in the Butler, each announced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, cli, note, run_header, save_result, stack_env

EXPOSURE = 2026112200001
RUN = "LSSTCam/raw/all"
DETECTORS = 205
INSTANCES = 2
GOAL_SECONDS = 7.0
#: concurrent handlers per instance
HANDLERS = 32

#: one register-function instance: says it is ready, waits for the parent's start time, handles
#: its events ``handlers`` at once, prints its outcomes, stage times and CPU (warm-up, handling)
_INSTANCE = """
import json, resource, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from functions.register.service import RegisterService
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId
from obsingest.registry import open_registry
from obsingest.settings import RegistrySettings
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import GCS_NOTIFICATION_FINALIZE, ObjectEvent

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

url, root, exposure, handlers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
detectors = [int(d) for d in sys.argv[5].split(",")]
store = LocalDirStore(Path(root))
registry = open_registry(RegistrySettings(url=url))
bus = InMemoryBus()
service = RegisterService(store, registry, bus)
events = [
    ObjectEvent(f"b:{d}", GCS_NOTIFICATION_FINALIZE,
                store.stat(DataId("LSSTCam", exposure, d).object_name()))
    for d in detectors
]
# stage times: checked (read + header checked, the registration submitted), batches, announced
checked, batches, announced_at, lock = [], [], [], threading.Lock()
def stamped(fn, record):
    def call(*args, **kwargs):
        t0 = time.time()
        out = fn(*args, **kwargs)
        with lock:
            record(t0, time.time(), *args)
        return out
    return call
registry.register = stamped(registry.register, lambda t0, t1, *_: checked.append(t0))
registry._batches._flush = stamped(
    registry._batches._flush, lambda t0, t1, batch: batches.append((t0, t1, len(batch))))
bus.publish = stamped(
    bus.publish, lambda t0, t1, topic, *_: topic == "ccd-arrivals" and announced_at.append(t1))
print(json.dumps({"ready": time.time(), "cpu_warm": cpu()}), flush=True)
start = float(sys.stdin.readline())
time.sleep(max(0.0, start - time.time()))
cpu0 = cpu()
def handle(event):
    outcome = service.handle(event)
    return outcome.status, time.time()
with ThreadPoolExecutor(handlers) as pool:
    done = list(pool.map(handle, events))
end = time.time()
print(json.dumps({"outcomes": [s for s, _ in done], "end": end, "returned": [t for _, t in done],
                  "announced": len(bus.topics["ccd-arrivals"]), "announced_at": announced_at,
                  "checked": checked,
                  "flushes": batches, "cpu_handle": cpu() - cpu0,
                  "batches": registry.batch_stats()}))
registry.close()
"""


def _repo(admin_url: str, root: Path, made: list[str]) -> tuple[str, str]:
    """A repository from ``butler create --seed-config`` (PostgreSQL registry) and a companion
    database: (``butler:`` URL, companion URL)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from infra.local.provision import create_database

    db = create_database(admin_url, "bench_butler")
    made.append(db)
    plain = make_url(db).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    seed = root.with_suffix(".seed.yaml")
    seed.write_text(json.dumps({"registry": {"db": plain}}))
    butler = str(Path(sys.executable).with_name("butler"))
    subprocess.run([butler, "create", "--seed-config", str(seed), str(root)], check=True)
    companion = create_database(admin_url, "bench_companion")
    made.append(companion)
    return f"butler:///{root.resolve().as_posix().lstrip('/')}", companion


def _obsingest(url: str, store_root: Path, env: dict[str, str], work: Path) -> dict[str, Any]:
    """Both instances started and warm (each says so), then the deliveries start together."""
    spawned = time.time()
    procs = []
    for i in range(INSTANCES):
        mine = ",".join(str(d) for d in range(DETECTORS) if d % INSTANCES == i)
        args = [url, str(store_root), str(EXPOSURE), str(HANDLERS), mine]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _INSTANCE, *args],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=(work / f"instance-{i}.log").open("w"),
                text=True,
            )
        )
    warm = []
    for i, proc in enumerate(procs):
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        if not line:
            log = (work / f"instance-{i}.log").read_text()[-2000:]
            raise RuntimeError(f"register instance failed before it was ready: {log}")
        warm.append(json.loads(line))
    start = time.time() + 0.2  # every instance is ready and waiting
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start}\n")
        proc.stdin.flush()
    reports = []
    for i, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=240)
        if proc.returncode != 0:
            log = (work / f"instance-{i}.log").read_text()[-2000:]
            raise RuntimeError(f"register instance failed: {log}")
        reports.append(json.loads(out.splitlines()[-1]))
    outcomes = [s for r in reports for s in r["outcomes"]]
    flushes = [f for r in reports for f in r["flushes"]]

    def last(key: str) -> float:
        return round(max(t for r in reports for t in r[key]) - start, 3)

    return {
        "seconds": round(max(r["end"] for r in reports) - start, 3),
        "registered": outcomes.count("registered"),
        "announced": sum(r["announced"] for r in reports),
        "largest_batch": max(r["batches"]["largest_batch"] for r in reports),
        "batches": sum(r["batches"]["batches"] for r in reports),
        "handlers": HANDLERS,
        # seconds after the delivery until the last CCD passed each stage
        "stages": {
            "last_checked": last("checked"),
            "last_committed": round(max(end for _, end, _ in flushes) - start, 3),
            "last_announced": last("announced_at"),
            "last_returned": last("returned"),
            "batch_seconds_sum": round(sum(end - begin for begin, end, _ in flushes), 3),
        },
        "warm_up_seconds": round(max(w["ready"] for w in warm) - spawned, 3),
        "cpu_seconds": {
            "warm_up": [round(w["cpu_warm"], 3) for w in warm],
            "handling": [round(r["cpu_handle"], 3) for r in reports],
        },
    }


def _butler_ingest_files(url: str, store_root: Path, work: Path) -> float:
    """``butler ingest-files`` of the 205 files (records set up first, untimed); seconds."""
    from lsst.daf.butler import Butler

    from obsingest.dataid import DataId
    from obsingest.registry.butler_repo import FALLBACK_FORMATTER, repo_of
    from obsingest.registry.butler_setup import ButlerSetup
    from obsingest.registry.registry import ExposureRecord

    repo = repo_of(url)
    butler = Butler.from_config(repo, writeable=True)
    try:
        setup = ButlerSetup(butler, "raw", "Exposure")
        setup.prepare([RUN], ["LSSTCam"])
        setup.exposure(ExposureRecord("LSSTCam", EXPOSURE, EXPOSURE // 100_000))
    finally:
        butler.close()
    table = work / "ingest.csv"
    lines = ["file,instrument,exposure,detector"]  # the file first, as ingest-files reads it
    for det in range(DETECTORS):
        path = store_root / DataId("LSSTCam", EXPOSURE, det).object_name()
        lines.append(f"{path},LSSTCam,{EXPOSURE},{det}")
    table.write_text("\n".join(lines) + "\n")
    command = [str(Path(sys.executable).with_name("butler")), "ingest-files", repo, "raw", RUN]
    command += [str(table), "--transfer", "direct", "--formatter", FALLBACK_FORMATTER]
    command += ["--id-generation-mode", "dataid_type_run"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"butler ingest-files failed: {done.stderr[-2000:]}")
    return round(time.perf_counter() - started, 3)


def _count(url: str) -> int:
    from lsst.daf.butler import Butler

    from obsingest.registry.butler_repo import repo_of

    with Butler.from_config(repo_of(url)) as butler:
        return len(butler.query_datasets("raw", RUN, limit=None, explain=False))


def run() -> dict[str, Any]:
    from benchmarks.registry import prepare_store
    from infra.local.provision import drop_database
    from obsingest.registry.butler_setup import set_up_repository
    from obsingest.settings import RegistrySettings

    admin_url = stack_env("postgres")["OBSINGEST_REGISTRY_URL"]
    made: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-butler-facility-") as tmp:
            work = Path(tmp)
            prepare_store(work / "store", EXPOSURE, DETECTORS)
            url, companion = _repo(admin_url, work / "repo", made)
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            env["OBSINGEST_BUTLER_COMPANION_URL"] = companion
            os.environ["OBSINGEST_BUTLER_COMPANION_URL"] = companion
            set_up_repository(RegistrySettings(url=url), ["LSSTCam"])  # `obsingest setup`
            ours = _obsingest(url, work / "store", env, work)
            ours["in_butler"] = _count(url)
            ref_url, _ = _repo(admin_url, work / "reference", made)
            reference = _butler_ingest_files(ref_url, work / "store", work)
            referenced = _count(ref_url)
    finally:
        for url_ in made:
            drop_database(admin_url, url_)
    met = ours["seconds"] <= GOAL_SECONDS and ours["in_butler"] == DETECTORS
    met = met and ours["registered"] == DETECTORS and ours["announced"] == DETECTORS
    result = {
        **run_header("butler_facility"),
        "ccds": DETECTORS,
        "instances": INSTANCES,
        "obsingest": ours,
        "butler_ingest_files": {"seconds": reference, "in_butler": referenced},
        "ratio": round(reference / ours["seconds"], 2) if ours["seconds"] else None,
        "ratio_cold": round(reference / (ours["warm_up_seconds"] + ours["seconds"]), 2),
        "goal": {"last_ccd_within_seconds": GOAL_SECONDS, "met": met},
    }
    save_result("butler_facility", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    ours, ref = result["obsingest"], result["butler_ingest_files"]
    load = result["machine"]["load_1min"]
    stages, cpu = ours["stages"], ours["cpu_seconds"]
    lines = [
        f"A whole LSSTCam exposure ({result['ccds']} CCDs) delivered at once to "
        f"{result['instances']} warm register-function processes ({ours['handlers']} "
        "handlers each) on one PostgreSQL Butler from `butler create` (load average at the "
        f"start {load} on {result['machine']['cpus']} cores).",
        "",
        "| path | seconds | in the Butler | registered | announced | batches (largest) |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        f"| obsingest, delivery -> last CCD announced | {ours['seconds']} | "
        f"{ours['in_butler']} | {ours['registered']} | {ours['announced']} | "
        f"{ours['batches']} ({ours['largest_batch']}) |",
        f"| `butler ingest-files` (whole command) | {ref['seconds']} | {ref['in_butler']} | - | - | - |",
        "",
        "Seconds after the delivery when the last CCD was read and checked "
        f"{stages['last_checked']}, committed (Butler + companion) "
        f"{stages['last_committed']}, announced {stages['last_announced']}, its handler "
        f"back {stages['last_returned']}; batches took {stages['batch_seconds_sum']} s in "
        f"all. CPU seconds per instance: start-up {cpu['warm_up']} (imports, the "
        f"Butler and the companion opened; {ours['warm_up_seconds']} s wall for both), "
        f"handling {cpu['handling']}.",
        "",
        note("butler_facility").rstrip().format(warm_up=ours["warm_up_seconds"], load=load),
        "",
        f"Ratio (butler ingest-files / obsingest): {result['ratio']} warm, "
        f"{result['ratio_cold']} counting the instances' start-up. Goal (last CCD within "
        f"{result['goal']['last_ccd_within_seconds']} s, 205 in the "
        f"Butler, each announced): {'met' if result['goal']['met'] else 'NOT met'}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run))
