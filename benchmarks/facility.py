"""What one pass of the facility service costs as the night's bucket fills: CPU seconds of the
incremental pass and of the full-window sweep at 5,000 and 50,000 objects.

Goal (issue 24): the incremental pass flat (within 20 %). The fill is untimed; the sizes alternate
so load drift hits both. The facility's clock runs ``AHEAD`` seconds ahead, past the watermark's
lag (which in a real night is a constant).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.common import cli, run_header, save_result

SIZES = (5_000, 50_000)
PASSES = 15
DETECTORS = 205
INSTRUMENT = "LSSTCam"
RUN = "LSSTCam/raw/all"
DAY_OBS = 20261122
AHEAD = 3600.0
GOAL_FLAT = 0.20


def _store_exposure(store: Any, registry: Any, seq: int) -> None:
    """One exposure of tiny objects in the store and, in one transaction, the rows the register
    function writes for them (exposure, datasets, datastore records, published outbox rows)."""
    from sqlalchemy import insert

    from obsingest.dataid import DataId
    from obsingest.registry import tables
    from obsingest.registry.facility_tables import arrival_outbox

    exposure = DAY_OBS * 100_000 + seq
    now = datetime.now(UTC)
    datasets, records, outbox = [], [], []
    for detector in range(DETECTORS):
        obj = store.put(DataId(INSTRUMENT, exposure, detector).object_name(), b"x").obj
        dataset_id = uuid.uuid4()
        datasets.append(
            {
                "id": dataset_id,
                "dataset_type": "raw",
                "run": RUN,
                "instrument": INSTRUMENT,
                "exposure": exposure,
                "detector": detector,
                "ingest_time": now,
            }
        )
        records.append(
            {
                "dataset_id": dataset_id,
                "uri": obj.uri,
                "size": obj.size,
                "checksum": obj.crc32c,
                "md5": "",
                "stored_time": obj.time_created,
                "transport": "direct",
            }
        )
        outbox.append(
            {
                "dataset_id": dataset_id,
                "topic": "ccd-arrivals",
                "payload": b"x",
                "attributes": "{}",
                "created_at": now,
                "published_at": now,
            }
        )
    with registry.engine.begin() as conn:
        if seq == 1:
            conn.execute(insert(tables.run).values(name=RUN))
        conn.execute(insert(tables.exposure).values(instrument=INSTRUMENT, id=exposure, day_obs=DAY_OBS))
        conn.execute(insert(tables.dataset), datasets)
        conn.execute(insert(tables.datastore_record), records)
        conn.execute(insert(arrival_outbox), outbox)


@contextlib.contextmanager
def _world(objects: int) -> Any:
    """A local store and a registry filled to ``objects``, and a facility service on them."""
    from functions.register.facility.settings import ReconcileSettings, RedriveSettings
    from functions.register.facility.wiring import build_facility
    from functions.register.wiring import build_service
    from obsingest.bus.memory import InMemoryBus
    from obsingest.registry import Registry
    from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
    from obsingest.store.local import LocalDirStore

    scratch = "/dev/shm" if Path("/dev/shm").is_dir() else None  # a fill of minutes on disk
    with tempfile.TemporaryDirectory(prefix="bench-facility-", dir=scratch) as tmp:
        store = LocalDirStore(Path(tmp) / "store", notify=False)
        registry = Registry.open(RegistrySettings(url=f"sqlite:///{tmp}/registry.sqlite3"))
        exposures = objects // DETECTORS
        started = time.perf_counter()
        with mock.patch.object(os, "fsync", lambda _fd: None):  # the fill is not measured
            for seq in range(1, exposures + 1):
                _store_exposure(store, registry, seq)
        fill_s = time.perf_counter() - started
        service = build_service(
            store, registry, InMemoryBus(), StoreSettings(url=f"file://{tmp}/store"), BusSettings()
        )
        settings = ReconcileSettings(canary=False, window=12 * 3600.0)
        facility = build_facility(service, BusSettings(), settings, RedriveSettings(enabled=False))
        assert facility.reconciler is not None  # built: ReconcileSettings were given
        facility.clock = facility.reconciler.clock = lambda: datetime.now(UTC) + timedelta(seconds=AHEAD)
        world = {
            "facility": facility,
            "store": store,
            "registry": registry,
            "exposures": exposures,
            "fill_s": fill_s,
            "full": [],
            "incremental": [],
        }
        try:
            yield world
        finally:
            registry.close()


def _one_pass(world: dict[str, Any], n: int) -> None:
    """Pass ``n`` (0: the first, a full sweep; then one new exposure before each)."""
    if n:
        _store_exposure(world["store"], world["registry"], world["exposures"] + n)
    cpu, wall = time.process_time(), time.perf_counter()
    report = world["facility"].run_pass()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert not report.errors and report.reconcile is not None, report.as_dict()
    assert report.reconcile.missing == 0, report.reconcile.as_dict()
    world[report.reconcile.mode].append((cpu, wall, report.reconcile.listed))


def _row(world: dict[str, Any]) -> dict[str, Any]:
    inc, full = world["incremental"], world["full"]
    return {
        "objects": world["exposures"] * DETECTORS,
        "fill_s": round(world["fill_s"], 1),
        "incremental_cpu_s_median": round(statistics.median(s[0] for s in inc), 4),
        "incremental_cpu_s_max": round(max(s[0] for s in inc), 4),
        "incremental_wall_s_median": round(statistics.median(s[1] for s in inc), 4),
        "incremental_listed_median": statistics.median(s[2] for s in inc),
        "full_cpu_s": round(full[0][0], 3),
        "full_wall_s": round(full[0][1], 3),
        "full_listed": full[0][2],
        "passes": len(inc),
    }


def run(sizes: tuple[int, ...] = SIZES, passes: int = PASSES) -> dict[str, Any]:
    """Both sizes filled side by side, their passes alternated (the machine's load drifts)."""
    with contextlib.ExitStack() as stack:
        worlds = []
        for size in sizes:
            print(f"facility benchmark: filling {size:,} objects ...", file=sys.stderr)
            worlds.append(stack.enter_context(_world(size)))
        for n in range(passes + 1):
            for world in worlds:
                _one_pass(world, n)
        rows = [_row(world) for world in worlds]
    small, large = rows[0], rows[-1]
    ratio = large["incremental_cpu_s_median"] / small["incremental_cpu_s_median"]
    result = {
        **run_header("facility"),
        "what": "CPU seconds of one facility-service pass (reconcile, exposures sweep, outbox "
        "drain and status; local store, SQLite registry in-process) after one new exposure of "
        f"{DETECTORS} CCDs, median of {passes} passes alternated between the sizes; the "
        "full-window sweep once per size",
        "sizes": rows,
        "incremental_ratio_large_to_small": round(ratio, 3),
        "goal": f"incremental pass CPU grows at most {GOAL_FLAT:.0%} from "
        f"{small['objects']:,} to {large['objects']:,} objects",
        "goal_met": ratio <= 1.0 + GOAL_FLAT,
    }
    save_result("facility", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    lines = [
        result["what"] + ". " + ("Goal met" if result["goal_met"] else "Goal NOT met") + ": "
        f"{result['goal']} (ratio {result['incremental_ratio_large_to_small']}).",
        "",
        "| objects in the bucket | incremental pass CPU s (median, max) | wall s | names listed "
        "| full sweep CPU s | wall s | names listed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["sizes"]:
        lines.append(
            f"| {row['objects']:,} | {row['incremental_cpu_s_median']:.4f}, "
            f"{row['incremental_cpu_s_max']:.4f} | {row['incremental_wall_s_median']:.4f} | "
            f"{row['incremental_listed_median']:,.0f} | {row['full_cpu_s']:.3f} | "
            f"{row['full_wall_s']:.3f} | {row['full_listed']:,} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run, format_section))
