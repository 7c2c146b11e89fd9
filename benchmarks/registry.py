"""Registrations per second, one event per call, on PostgreSQL (the local stack's) and SQLite.

``RegisterService.handle`` end to end and the bare ``Registry.register``, sequential, medians of
runs on fresh databases. Goal: at least 10x the Rubin Butler's one file per call on SQLite.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import cli, run_header, save_result, stack_env

REFERENCE_PER_SECOND = 40.0  # Rubin Butler, one file per call on SQLite (~25 ms)
GOAL_FACTOR = 10.0
INSTRUMENT = "LSSTCam"
DAY_OBS = 20261122


def small_ccd(exposure: int, detector: int, seed: int = 0) -> bytes:
    """A small simulated CCD of ``exposure`` (night ``DAY_OBS``), compressed."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    start = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    spec = CcdSpec(INSTRUMENT, exposure, detector, DAY_OBS, start, 15.0, "r", "small", seed=seed)
    return compress_fits(generate_raw_ccd(spec), threads=1)


def stored_events(store: Any, exposure: int, detectors: range, seed: int = 0) -> list[Any]:
    """Store the CCDs of ``exposure``; their finalize events (no notification outbox)."""
    from obsingest.dataid import DataId
    from obsingest.messages import utcnow
    from obsingest.store.notifications import GCS_NOTIFICATION_FINALIZE, ObjectEvent
    from producers.uploader import DirectUploader

    uploader = DirectUploader(store, producer="bench")
    events = []
    for det in detectors:
        sent = uploader.send(DataId(INSTRUMENT, exposure, det), small_ccd(exposure, det, seed), utcnow())
        events.append(ObjectEvent(f"e{exposure}-{det}", GCS_NOTIFICATION_FINALIZE, sent.obj))
    return events


def prepare_store(root: Path, exposure: int, count: int) -> tuple[Any, list[Any]]:
    """``count`` small CCDs of one exposure in a local store; their finalize events."""
    from obsingest.store.local import LocalDirStore

    store = LocalDirStore(root, notify=False)
    return store, stored_events(store, exposure, range(count))


def _measure(new_url: Callable[[], str], store: Any, events: list[Any], kind: str) -> float:
    """Calls per second of one run on a fresh database at ``new_url()``."""
    from functions.register.service import RegisterService
    from obsingest.bus.memory import InMemoryBus
    from obsingest.checksums import checksum_from_crc32c_b64
    from obsingest.dataid import parse_object_name
    from obsingest.registry import FileRecord, Registry, tables
    from obsingest.settings import RegistrySettings

    registry = Registry.open(RegistrySettings(url=new_url()))
    try:
        # warm-up outside the timing: pool connection, prepared statements, dimension rows
        warm = registry.register(
            FileRecord(parse_object_name(events[0].obj.name), "warm", 1, "crc32c:00000000")
        )
        assert warm.created
        with registry.engine.begin() as conn:
            conn.execute(tables.datastore_record.delete())
            conn.execute(tables.dataset.delete())
        calls: list[Callable[..., object]]
        if kind == "service":
            service = RegisterService(store, registry, InMemoryBus())
            calls = [lambda e=e: _expect(service.handle(e).status, "registered") for e in events]
        else:
            records = [
                FileRecord(
                    parse_object_name(e.obj.name),
                    store.uri(e.obj.name),
                    e.obj.size,
                    checksum_from_crc32c_b64(e.obj.crc32c),
                )
                for e in events
            ]
            calls = [lambda r=r: registry.register(r) for r in records]
        start = time.perf_counter()
        for call in calls:
            call()
        rate = len(calls) / (time.perf_counter() - start)
        assert registry.count_datasets() == len(events)
    finally:
        registry.close()
    return rate


def _expect(value: str, expected: str) -> None:
    if value != expected:
        raise AssertionError(f"expected {expected}, got {value}")


def run(repeats: int = 3, ccds: int = 189) -> dict[str, Any]:
    from infra.local.provision import create_database, drop_database
    from obsingest.dataid import make_exposure_id

    admin_url = stack_env("postgres")["OBSINGEST_REGISTRY_URL"]
    exposure = make_exposure_id(DAY_OBS, 77)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        tmpdir = Path(tmp)
        store, events = prepare_store(tmpdir / "store", exposure, ccds)
        made: list[str] = []
        names = itertools.count()

        def postgres() -> str:
            made.append(create_database(admin_url, "bench_reg"))
            return made[-1]

        def sqlite() -> str:
            return f"sqlite:///{tmpdir / f'registry-{next(names)}.sqlite3'}"

        try:
            for backend, new_url in (("postgresql", postgres), ("sqlite", sqlite)):
                for kind in ("service", "registry"):
                    rates = [_measure(new_url, store, events, kind) for _ in range(repeats)]
                    median = statistics.median(rates)
                    results[f"{backend}.{kind}"] = {
                        "per_second_median": round(median, 1),
                        "ms_per_call_median": round(1000.0 / median, 3),
                        "per_second_samples": [round(r, 1) for r in rates],
                        "vs_reference": round(median / REFERENCE_PER_SECOND, 1),
                        "goal_met": median >= REFERENCE_PER_SECOND * GOAL_FACTOR,
                    }
        finally:
            for url in made:  # throwaway databases: do not let them pile up in the stack
                drop_database(admin_url, url)
    result = {
        **run_header("registry"),
        "method": (
            f"{ccds} small {INSTRUMENT} CCDs of one exposure, one event per call, sequential; "
            f"median of {repeats} runs, each on a fresh database; service = "
            "RegisterService.handle (read, verify, parse header, register, publish to an "
            "in-memory bus); registry = bare Registry.register"
        ),
        "reference": {
            "what": "Rubin Data Butler, one file per call on SQLite",
            "per_second": REFERENCE_PER_SECOND,
            "goal_per_second": REFERENCE_PER_SECOND * GOAL_FACTOR,
        },
        "results": results,
        "all_goals_met": all(r["goal_met"] for r in results.values()),
    }
    save_result("registry", result)
    return result


if __name__ == "__main__":
    sys.exit(cli(run, lambda r: json.dumps(r["results"], indent=2)))
