"""The CCD files the harness reads: every detector's raw file and compressed twin, written once
per size (atomically) into a cache and reused by every run, since simulating inside a
measurement would measure the simulator.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path

from obsingest import camera
from obsingest.dataid import DataId, exposure_day_obs
from obsingest.fileio import flocked
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.producer.transfer")

INSTRUMENT = "LSSTCam"
#: The exposure the cached files are generated for; retargeted per exposure when read.
CACHE_EXPOSURE = 2026112200001
_OBS_START = datetime(2026, 11, 23, 3, 0, 0, tzinfo=UTC)
_LOCK = ".lock"


def ccd_paths(cache_dir: Path, size: str, detector: int) -> tuple[Path, Path]:
    """(raw ``.fits``, compressed ``.fits.fz``) of one detector in the cache, under the camera's
    file name (files cached by versions that wrote other headers are not reused)."""
    raw = cache_dir / size / DataId(INSTRUMENT, CACHE_EXPOSURE, detector).identity().file_name
    return raw, raw.with_name(raw.name + ".fz")


def _make(cache_dir: str, size: str, detector: int) -> int:
    from producers.compress import compress_file
    from producers.daq.simulator import CcdSpec, write_raw_ccd

    raw, fz = ccd_paths(Path(cache_dir), size, detector)
    if not raw.exists():
        day_obs = exposure_day_obs(CACHE_EXPOSURE)
        spec = CcdSpec(INSTRUMENT, CACHE_EXPOSURE, detector, day_obs, _OBS_START, 30.0, "r", size)  # type: ignore[arg-type]
        write_raw_ccd(spec, raw)
    if not fz.exists():
        compress_file(raw, fz, threads=1)
    return detector


def ensure_ccd_files(
    cache_dir: Path, size: str, detectors: list[int], progress: Callable[[int, int], None] | None = None
) -> dict[int, tuple[Path, Path]]:
    """Make sure every detector's raw and compressed file is in the cache; return their paths.
    What no detector is named now (an older version's files, a killed run's temp files) goes:
    the cache holds at most each detector's pair once per size, whatever ran before."""
    paths = {d: ccd_paths(cache_dir, size, d) for d in detectors}
    (cache_dir / size).mkdir(parents=True, exist_ok=True)
    with flocked(cache_dir / size / _LOCK):  # one run generates and prunes at a time
        missing = [d for d, (raw, fz) in paths.items() if not (raw.exists() and fz.exists())]
        if missing:
            log_event(log, "transfer.cache.generate", size=size, detectors=missing)
            ctx = get_context("spawn")
            procs = min(len(missing), os.cpu_count() or 1)
            with ProcessPoolExecutor(procs, mp_context=ctx) as pool:
                futures = [pool.submit(_make, str(cache_dir), size, d) for d in missing]
                for done, future in enumerate(futures, 1):
                    future.result()
                    if progress:
                        progress(done, len(missing))
        every = camera.instrument(INSTRUMENT).detector_ids
        keep = {_LOCK, *(path.name for d in every for path in ccd_paths(cache_dir, size, d))}
        for path in (cache_dir / size).iterdir():
            if path.name in keep:
                continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    return paths
