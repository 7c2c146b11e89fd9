"""Play a night into an edge hand-off directory at the summit's cadence (``obsingest daq night``).

Per exposure, at its readout moment: the manifest, then every CCD under the camera's name
(README.md), each written to a temporary name and renamed (the edge's ``rename`` rule). The
manifest's ``obs_start`` (UTC) is the headers' DATE-BEG and CCDs are read out ``dark_time``
later, so files, manifest and the edge's clock agree on one instant.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from obsingest.fileio import write_atomic
from obsingest.messages import ExposureManifest
from obsingest.timescales import camera_time
from producers.daq.header import Cards
from producers.daq.manifest import exposure_manifest
from producers.daq.simulator import INSTRUMENTS, CcdSpec, exposure_id, generate_raw_ccd, header_cards
from producers.edge.files import manifest_json  # the JSON the edge reads

FILTERS = ("u", "g", "r", "i", "z", "y")


@dataclass(frozen=True)
class NightPlan:
    handoff: Path
    instrument: str = "LSSTCam"
    exposures: int = 10
    detectors: int = 9
    interval: float = 17.0
    size: Literal["full", "small"] = "small"
    day_obs: int | None = None
    first_seq: int = 1
    exposure_time: float = 15.0
    seed: int = 0
    #: sub-directories per exposure (``<day_obs>/<obs_id>/``) instead of a flat directory
    nested: bool = True
    #: write each CCD's JSON header sidecar (``{file stem}.json``) before it
    sidecars: bool = False
    #: a real header's primary cards (``header.load_template``) every CCD is written from
    template: Cards | None = None


@dataclass(frozen=True)
class PlayedExposure:
    exposure: int
    readout: datetime
    files: list[Path]


def sidecar_json(spec: CcdSpec) -> str:
    """The JSON header sidecar of one CCD, as Rubin keeps one beside each raw: its primary
    header's cards (null for an empty one) under ``"__CONTENT__": "metadata"``."""
    return json.dumps({"__CONTENT__": "metadata", **dict(header_cards(spec))}, indent=1)


def _spec(
    plan: NightPlan, exposure: int, detector: int, day_obs: int, readout: datetime, band: str
) -> CcdSpec:
    """One CCD of the night, read out at ``readout`` (UTC)."""
    spec = CcdSpec(
        plan.instrument,
        exposure,
        detector,
        day_obs,
        readout,
        plan.exposure_time,
        band,
        plan.size,
        plan.seed,
        template=plan.template,
    )  # type: ignore[arg-type]
    return replace(spec, obs_start=readout - timedelta(seconds=spec.dark_time))


def generation_lead(interval: float, last: float) -> float:
    """Seconds before an exposure's readout to start generating its CCDs: half the interval, or
    twice the last exposure's generation and a second, at most the interval. Not right after a
    readout: that would take the CPU from the burst the pipeline is handling (a real DAQ does not
    share the pipeline's cores)."""
    return min(interval, max(interval / 2, 2 * last + 1.0))


def first_readout_lead(plan: NightPlan, day_obs: int, detectors: list[int]) -> float:
    """Seconds from now to the first readout, time to generate its CCDs (as ``generation_lead``,
    from one CCD generated now, which also fills the caches): a readout stamped before its CCDs
    exist would put generation inside every latency measured from it."""
    if plan.interval <= 0:
        return 0.0
    exposure = exposure_id(day_obs, plan.first_seq)
    spec = _spec(plan, exposure, detectors[0], day_obs, datetime.now(UTC), FILTERS[0])
    began = time.monotonic()
    generate_raw_ccd(spec)
    return min(plan.interval, 2 * (time.monotonic() - began) * len(detectors) + 1.0)


def _wait_until(moment: float, stop: Callable[[], bool]) -> bool:
    """Sleep until the monotonic ``moment``; False if ``stop`` said so first."""
    while (left := moment - time.monotonic()) > 0:
        if stop():
            return False
        time.sleep(min(left, 0.2))
    return True


def play_night(
    plan: NightPlan,
    on_exposure: Callable[[PlayedExposure], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    on_manifest: Callable[[ExposureManifest], None] | None = None,
) -> list[PlayedExposure]:
    """Write the night; returns what was written (and tells ``on_exposure`` as it goes).
    ``on_manifest`` gets each manifest after its file is written and before any of its CCDs
    (it may block: the CCDs wait for it)."""
    if plan.instrument not in INSTRUMENTS:
        raise ValueError(f"unknown instrument {plan.instrument!r}; known: {sorted(INSTRUMENTS)}")

    ids = INSTRUMENTS[plan.instrument].detector_ids  # as the observatory numbers them
    if not 1 <= plan.detectors <= len(ids):
        raise ValueError(f"--detectors must be 1..{len(ids)} for {plan.instrument}")
    day_obs = plan.day_obs or int(datetime.now(UTC).strftime("%Y%m%d"))
    detectors = list(ids[: plan.detectors])
    camera_time(datetime.now(UTC))  # astropy's leap seconds loaded now, not in the first readout
    start = time.monotonic() + first_readout_lead(plan, day_obs, detectors)
    played: list[PlayedExposure] = []
    generating = 0.0  # wall seconds the last exposure's CCDs took to generate
    for index in range(plan.exposures):
        if stop():
            break
        exposure = exposure_id(day_obs, plan.first_seq + index)
        filt = FILTERS[index % len(FILTERS)]
        readout_due = start + index * plan.interval
        if index and not _wait_until(readout_due - generation_lead(plan.interval, generating), stop):
            return played
        # the pixels do not depend on the time: generate before the readout moment, with the
        # times of the readout to come (integration began dark_time before it)
        readout_at = datetime.now(UTC) + timedelta(seconds=max(0.0, readout_due - time.monotonic()))
        specs = [_spec(plan, exposure, det, day_obs, readout_at, filt) for det in detectors]
        began = time.monotonic()
        images = [generate_raw_ccd(spec) for spec in specs]
        generating = time.monotonic() - began
        if not _wait_until(readout_due, stop):
            return played
        obs_id = specs[0].identity.obs_id
        folder = plan.handoff / str(day_obs) / obs_id if plan.nested else plan.handoff
        folder.mkdir(parents=True, exist_ok=True)
        manifest = exposure_manifest(
            plan.instrument, exposure, day_obs, specs[0].obs_start, plan.exposure_time, filt, detectors
        )
        readout = manifest.published
        path = folder / f"{plan.instrument}_{exposure}.manifest.json"
        write_atomic(path, manifest_json(manifest).encode())
        if on_manifest is not None:
            on_manifest(manifest)
        files = []
        for spec, image in zip(specs, images, strict=True):
            path = folder / spec.file_name
            if plan.sidecars:
                write_atomic(path.with_suffix(".json"), sidecar_json(spec).encode())
            write_atomic(path, image)  # temp name beside it, then rename
            files.append(path)
        item = PlayedExposure(exposure, readout, files)
        played.append(item)
        if on_exposure is not None:
            on_exposure(item)
    return played
