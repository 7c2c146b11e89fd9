"""Registration into a real daf_butler repository through obsingest, next to Butler's own ingest.

SQLite repository, small CCDs, medians of ``repeats`` runs on fresh exposures, wall and CPU
seconds. Goal: an exposure registered within 1 s of its last CCD, at least 10x Butler's
one-file-per-call rate.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchmarks.common import cli, note, run_header, save_result
from benchmarks.registry import DAY_OBS, INSTRUMENT, small_ccd, stored_events

if TYPE_CHECKING:
    from obsingest.registry.butler import ButlerRegistry

RUN = "LSSTCam/raw/all"
DETECTORS = 205
GOAL_EXPOSURE_SECONDS = 1.0
GOAL_FACTOR = 10.0


def _butler_files(root: Path, exposure: int, count: int) -> list[Path]:
    """Files for Butler's own ingest: the same bytes as obsingest's CCDs, other names."""
    folder = root / f"butler-own/{exposure}"
    folder.mkdir(parents=True)
    paths = []
    for det in range(count):
        path = folder / f"{INSTRUMENT}_{exposure}_{det:03d}.fits.fz"
        path.write_bytes(small_ccd(DAY_OBS * 100_000 + 1, det % DETECTORS, seed=1))
        paths.append(path)
    return paths


def _exposure_record(exposure: int) -> Any:
    from obsingest.dataid import DataId
    from obsingest.fits import parse_fits
    from obsingest.registry.headers import exposure_from_header
    from producers.compress import decompress_fits

    raw = decompress_fits(small_ccd(exposure, 0, seed=1))
    return exposure_from_header(parse_fits(raw)[0], DataId(INSTRUMENT, exposure, 0), "bench")


def _butler_own(butler: Any, registry: Any, paths: list[Path], exposure: int, one_call: bool):
    """Butler's own ingest of ``paths`` as detectors of ``exposure``; (seconds, CPU seconds)."""
    from lsst.daf.butler import DatasetIdGenEnum, DatasetRef, FileDataset

    from obsingest.registry.butler_repo import raw_formatter

    registry.setup.exposure(_exposure_record(exposure))  # records first, not timed
    dtype = butler.get_dataset_type("raw")
    datasets = [
        FileDataset(
            str(path),
            [
                DatasetRef(
                    dtype,
                    {"instrument": INSTRUMENT, "exposure": exposure, "detector": det},  # type: ignore[arg-type]  # it standardizes a dict
                    run=RUN,
                    id_generation_mode=DatasetIdGenEnum.DATAID_TYPE_RUN,
                )
            ],
            formatter=raw_formatter(INSTRUMENT),
        )
        for det, path in enumerate(paths)
    ]
    started, cpu = time.perf_counter(), time.process_time()
    if one_call:
        butler.ingest(*datasets, transfer="direct")
    else:
        for dataset in datasets:
            butler.ingest(dataset, transfer="direct")
    return time.perf_counter() - started, time.process_time() - cpu


def _start_workers(pool: ThreadPoolExecutor, count: int) -> None:
    """Start ``count`` worker threads of ``pool`` now, so the timed run meets a warm pool."""
    everyone = threading.Barrier(count)
    list(pool.map(lambda _: everyone.wait(60), range(count)))


def run(repeats: int = 3, per_call: int = 40) -> dict[str, Any]:
    from lsst.daf.butler import Butler

    from functions.register.service import RegisterService
    from obsingest.bus.memory import InMemoryBus
    from obsingest.registry import open_registry
    from obsingest.registry.butler_repo import make_repo, repo_of
    from obsingest.settings import RegistrySettings
    from obsingest.store.local import LocalDirStore

    figures: dict[str, list[float]] = {
        "obsingest_per_ccd_s": [],
        "obsingest_exposure_s": [],
        "butler_per_file_s": [],
        "butler_per_exposure_s": [],
        # CPU seconds of this process (every thread): what a loaded machine does not stretch
        "obsingest_exposure_cpu_s": [],
        "butler_per_file_cpu_s": [],
    }
    batches: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-butler-") as tmp:
        root = Path(tmp)
        url = make_repo(root / "repo")
        store = LocalDirStore(root / "store", notify=False)
        registry = cast("ButlerRegistry", open_registry(RegistrySettings(url=url)))  # a Butler URL
        service = RegisterService(store, registry, InMemoryBus())
        butler = Butler.from_config(repo_of(url), writeable=True)
        exposure = DAY_OBS * 100_000
        try:
            # warm-up: imports, instrument and detector records, the dataset type
            exposure += 1
            for event in stored_events(store, exposure, range(2), seed=1):
                service.handle(event)
            for _ in range(repeats):
                exposure += 1
                events = stored_events(store, exposure, range(per_call), seed=1)
                started = time.perf_counter()
                statuses = {service.handle(e).status for e in events}
                assert statuses == {"registered"}, statuses
                figures["obsingest_per_ccd_s"].append((time.perf_counter() - started) / per_call)

                exposure += 1
                events = stored_events(store, exposure, range(DETECTORS), seed=1)
                before = dict(registry.batch_stats())
                with ThreadPoolExecutor(DETECTORS) as pool:
                    _start_workers(pool, DETECTORS)
                    started = time.perf_counter()  # every CCD of the exposure has arrived
                    cpu = time.process_time()
                    outcomes = list(pool.map(service.handle, events))
                    figures["obsingest_exposure_s"].append(time.perf_counter() - started)
                    figures["obsingest_exposure_cpu_s"].append(time.process_time() - cpu)
                assert {o.status for o in outcomes} == {"registered"}
                # asked of another Butler client on the same repository
                held = butler.query_datasets(
                    "raw", RUN, data_id={"instrument": INSTRUMENT, "exposure": exposure}
                )
                assert len(held) == DETECTORS, len(held)
                after = registry.batch_stats()
                made = after["batches"] - before["batches"]
                batches.append(
                    {
                        "transactions": made,
                        "largest": after["largest_batch"],
                        "mean": round((after["files"] - before["files"]) / max(made, 1), 1),
                    }
                )

                exposure += 1
                paths = _butler_files(root, exposure, per_call)
                seconds, cpu = _butler_own(butler, registry, paths, exposure, False)
                figures["butler_per_file_s"].append(seconds / per_call)
                figures["butler_per_file_cpu_s"].append(cpu / per_call)

                exposure += 1
                paths = _butler_files(root, exposure, DETECTORS)
                seconds, _ = _butler_own(butler, registry, paths, exposure, True)
                figures["butler_per_exposure_s"].append(seconds)
        finally:
            butler.close()
            registry.close()
    med = {k: statistics.median(v) for k, v in figures.items()}
    rates = {
        "obsingest_per_ccd_per_s": round(1 / med["obsingest_per_ccd_s"], 1),
        "obsingest_exposure_per_s": round(DETECTORS / med["obsingest_exposure_s"], 1),
        "butler_per_file_per_s": round(1 / med["butler_per_file_s"], 1),
        "butler_per_exposure_per_s": round(DETECTORS / med["butler_per_exposure_s"], 1),
    }
    factor = rates["obsingest_exposure_per_s"] / rates["butler_per_file_per_s"]
    result = {
        **run_header("butler"),
        "repository": "daf_butler, SQLite registry, local files, transfer=direct",
        "detectors": DETECTORS,
        "per_call_files": per_call,
        "repeats": repeats,
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
        "runs": {k: [round(x, 4) for x in v] for k, v in figures.items()},
        "rates_per_s": rates,
        "obsingest_transactions_per_exposure": batches,
        "factor_vs_butler_per_file": round(factor, 1),
        # the same comparison in CPU seconds, which a loaded machine does not stretch
        "cpu_factor_vs_butler_per_file": round(
            med["butler_per_file_cpu_s"] * DETECTORS / med["obsingest_exposure_cpu_s"], 1
        ),
        "goal": {
            "exposure_within_s": GOAL_EXPOSURE_SECONDS,
            "factor": GOAL_FACTOR,
            "met": med["obsingest_exposure_s"] <= GOAL_EXPOSURE_SECONDS and factor >= GOAL_FACTOR,
        },
    }
    save_result("butler", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    med, rates = result["median_seconds"], result["rates_per_s"]
    goal = result["goal"]
    tx = result["obsingest_transactions_per_exposure"]
    return "\n".join(
        [
            f"{result['repository']}; run `LSSTCam/raw/all`; small LSSTCam CCDs; median of "
            f"{result['repeats']} runs on fresh exposures; load average at the start "
            f"{result['machine']['load_1min']}.",
            "",
            "| registration | seconds | files/s | vs Butler one file per call |",
            "| --- | ---: | ---: | ---: |",
            f"| obsingest, one event at a time (per CCD) | {med['obsingest_per_ccd_s']} | "
            f"{rates['obsingest_per_ccd_per_s']:,} | "
            f"{rates['obsingest_per_ccd_per_s'] / rates['butler_per_file_per_s']:.1f}x |",
            f"| obsingest, a {result['detectors']}-CCD exposure arriving at once (group commit) | "
            f"{med['obsingest_exposure_s']} | {rates['obsingest_exposure_per_s']:,} | "
            f"{result['factor_vs_butler_per_file']}x |",
            f"| Butler `ingest`, one file per call | {med['butler_per_file_s']} | "
            f"{rates['butler_per_file_per_s']:,} | 1.0x |",
            f"| Butler `ingest`, one call per exposure | {med['butler_per_exposure_s']} | "
            f"{rates['butler_per_exposure_per_s']:,} | "
            f"{rates['butler_per_exposure_per_s'] / rates['butler_per_file_per_s']:.1f}x |",
            "",
            f"CPU seconds (this process, every thread): obsingest's exposure "
            f"{med['obsingest_exposure_cpu_s']}, Butler one file per call "
            f"{med['butler_per_file_cpu_s']} per file: "
            f"{result['cpu_factor_vs_butler_per_file']}x in CPU.",
            "",
            "Butler transactions per obsingest exposure: "
            + "; ".join(f"{t['transactions']} (largest {t['largest']})" for t in tx),
            "",
            f"Goal (exposure registered within {goal['exposure_within_s']} s of its last CCD, "
            f">= {goal['factor']:g}x Butler's one-file-per-call rate): "
            f"{'met' if goal['met'] else 'NOT met'}",
            "",
            note("butler").rstrip(),
        ]
    )


if __name__ == "__main__":
    sys.exit(cli(run))
