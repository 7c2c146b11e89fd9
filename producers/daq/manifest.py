"""What the DAQ announces before readout: the ExposureManifest listing every detector expected.
Completeness is counted against it, so it names them as the observatory numbers them: for a whole
LSSTCam exposure 189 science, 8 wavefront and 8 guider sensors (ids 0..204).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from obsingest import camera
from obsingest.messages import ExposureManifest, utcnow
from producers.daq.simulator import physical_filter


def expected_detectors(instrument: str, count: int | None = None) -> list[int]:
    """The first ``count`` detector ids of ``instrument`` in obs_lsst order (all by default)."""
    ids = list(camera.instrument(instrument).detector_ids)
    if count is None:
        return ids
    if not 1 <= count <= len(ids):
        raise ValueError(f"{instrument} reads out 1..{len(ids)} detectors, not {count}")
    return ids[:count]


def exposure_manifest(
    instrument: str,
    exposure: int,
    day_obs: int,
    obs_start: datetime,
    exposure_time: float,
    band: str,
    detectors: Sequence[int] | None = None,
) -> ExposureManifest:
    """The manifest of one exposure; ``detectors`` defaults to the whole focal plane. The filter
    is the physical filter (``r_57`` on LSSTCam), as the raw headers and the Butler name it."""
    ids = expected_detectors(instrument) if detectors is None else list(detectors)
    for det in ids:
        camera.detector(instrument, det)  # KeyError naming the valid ids
    return ExposureManifest(
        instrument=instrument,
        exposure=exposure,
        day_obs=day_obs,
        detectors=ids,
        obs_start=obs_start,
        exposure_time=exposure_time,
        filter=physical_filter(instrument, band)[0],
        published=utcnow(),
    )
