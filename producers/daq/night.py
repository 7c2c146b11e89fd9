"""Play a night into an edge hand-off directory at the summit's cadence (``obsingest daq night``).

Per exposure, at its readout moment: the manifest (``{instrument}_{exposure}.manifest.json``,
written first; then handed to ``on_manifest``, which ``obsingest daq night --publish-manifests``
uses to publish it on the ``exposures`` topic as the DAQ does), then every CCD as
``{instrument}_{exposure}_{detector:03d}.fits``, each written to a temporary name beside it and
renamed (the hand-off convention the edge's ``rename`` rule expects). CCDs of the next exposure
are generated while waiting, so the cadence holds for full-size CCDs too. Only the simulator's
public functions are used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from obsingest.fileio import write_atomic
from obsingest.messages import ExposureManifest
from producers.daq.simulator import INSTRUMENTS, CcdSpec, exposure_id, generate_raw_ccd

FILTERS = ("u", "g", "r", "i", "z", "y")


@dataclass(frozen=True)
class NightPlan:
    handoff: Path
    instrument: str = "LSSTCam"
    exposures: int = 10
    detectors: int = 9
    interval: float = 17.0
    size: str = "small"
    day_obs: int | None = None
    first_seq: int = 1
    exposure_time: float = 15.0
    seed: int = 0
    #: sub-directories per exposure (``<day_obs>/<exposure>/``) instead of a flat directory
    nested: bool = True


@dataclass(frozen=True)
class PlayedExposure:
    exposure: int
    readout: datetime
    files: list[Path]


def manifest_json(manifest: ExposureManifest) -> str:
    """An ExposureManifest as the JSON the edge reads."""
    return json.dumps({
        "instrument": manifest.instrument, "exposure": manifest.exposure,
        "day_obs": manifest.day_obs, "detectors": manifest.detectors,
        "obs_start": manifest.obs_start.isoformat(), "exposure_time": manifest.exposure_time,
        "filter": manifest.filter, "published": manifest.published.isoformat(),
    })  # fmt: skip


def play_night(
    plan: NightPlan,
    on_exposure: Callable[[PlayedExposure], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    on_manifest: Callable[[ExposureManifest], None] | None = None,
) -> list[PlayedExposure]:
    """Write the night; returns what was written (and tells ``on_exposure`` as it goes).

    ``on_manifest`` gets each exposure's manifest at its readout moment, after its file is
    written and before any of its CCDs is (it may block: the CCDs wait for it)."""
    if plan.instrument not in INSTRUMENTS:
        raise ValueError(f"unknown instrument {plan.instrument!r}; known: {sorted(INSTRUMENTS)}")
    ids = INSTRUMENTS[plan.instrument].detector_ids  # as the observatory numbers them
    if not 1 <= plan.detectors <= len(ids):
        raise ValueError(f"--detectors must be 1..{len(ids)} for {plan.instrument}")
    day_obs = plan.day_obs or int(datetime.now(UTC).strftime("%Y%m%d"))
    detectors = list(ids[: plan.detectors])
    start = time.monotonic()
    played = []
    for index in range(plan.exposures):
        if stop():
            break
        exposure = exposure_id(day_obs, plan.first_seq + index)
        filt = FILTERS[index % len(FILTERS)]
        readout_due = start + index * plan.interval
        # the pixels do not depend on the time: generate before the readout moment
        obs_start = datetime.now(UTC) + timedelta(seconds=max(0.0, readout_due - time.monotonic()))
        obs_start -= timedelta(seconds=plan.exposure_time)
        specs = [CcdSpec(plan.instrument, exposure, det, day_obs, obs_start, plan.exposure_time,
                         filt, plan.size, plan.seed) for det in detectors]  # type: ignore[arg-type]
        images = [generate_raw_ccd(spec) for spec in specs]
        while (left := readout_due - time.monotonic()) > 0:
            if stop():
                return played
            time.sleep(min(left, 0.2))
        folder = plan.handoff / str(day_obs) / str(exposure) if plan.nested else plan.handoff
        folder.mkdir(parents=True, exist_ok=True)
        readout = datetime.now(UTC)
        manifest = ExposureManifest(plan.instrument, exposure, day_obs, detectors,
                                    readout - timedelta(seconds=plan.exposure_time),
                                    plan.exposure_time, filt, readout)  # fmt: skip
        path = folder / f"{plan.instrument}_{exposure}.manifest.json"
        write_atomic(path, manifest_json(manifest).encode())
        if on_manifest is not None:
            on_manifest(manifest)
        files = []
        for det, image in zip(detectors, images, strict=True):
            path = folder / f"{plan.instrument}_{exposure}_{det:03d}.fits"
            write_atomic(path, image)  # temp name beside it, then rename
            files.append(path)
        item = PlayedExposure(exposure, readout, files)
        played.append(item)
        if on_exposure is not None:
            on_exposure(item)
    return played
