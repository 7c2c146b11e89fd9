"""What the registry should hold for a CCD, from obs_lsst's own ObservationInfo and filter
definitions: the oracle side of ``ingest_obs_lsst`` (kept apart so that script stays short).

The registry keeps instants as UTC datetimes, angles in degrees, times in seconds and an unknown
(NaN) angle as None; the oracle's values are put in those terms here, with astropy, independently
of ``obsingest.registry.headers``. The band is the one obs_lsst's filter definitions give the
physical filter (``python/lsst/obs/lsst/filters.py``, imported from the checkout with a stand-in
for ``lsst.obs.base``'s two filter classes, which only record their arguments).
"""

from __future__ import annotations

import importlib
import math
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: a physical filter obs_lsst's definitions do not list: its band is whatever obs_base makes of it
UNDEFINED = "(not in obs_lsst's filter definitions)"


class _FilterDefinition:
    """Stand-in for ``lsst.obs.base.FilterDefinition``: the arguments, nothing more."""

    def __init__(
        self,
        physical_filter: str,
        band: str | None = None,
        afw_name: str | None = None,
        alias: Any = (),
        **_other: Any,
    ) -> None:
        self.physical_filter, self.band, self.afw_name = physical_filter, band, afw_name
        self.alias = set(alias or ())


class _FilterDefinitionCollection(tuple):
    """Stand-in for ``lsst.obs.base.FilterDefinitionCollection``: the definitions, in order."""

    def __new__(cls, *definitions: _FilterDefinition) -> _FilterDefinitionCollection:
        return super().__new__(cls, definitions)


def oracle_bands(checkout: Path) -> dict[str, str]:
    """physical_filter -> band of every LSSTCam, LSSTComCam and LATISS filter definition.

    Needs ``check_obs_lsst.load_oracle`` to have registered the checkout's packages first."""
    if "lsst.obs.base" not in sys.modules:
        base = types.ModuleType("lsst.obs.base")
        base.FilterDefinition = _FilterDefinition  # type: ignore[attr-defined]
        base.FilterDefinitionCollection = _FilterDefinitionCollection  # type: ignore[attr-defined]
        sys.modules["lsst.obs.base"] = base
    filters = importlib.import_module("lsst.obs.lsst.filters")
    bands: dict[str, str] = {}
    for name in ("LATISS_FILTER_DEFINITIONS", "COMCAM_FILTER_DEFINITIONS", "LSSTCAM_FILTER_DEFINITIONS"):
        for definition in getattr(filters, name):
            bands.setdefault(definition.physical_filter, definition.band)
    return bands


def _utc(t: Any) -> datetime | None:
    return None if t is None else t.utc.to_datetime(timezone=UTC)


def _value(q: Any, unit: str) -> float | None:
    if q is None:
        return None
    value = float(q.to_value(unit))
    return None if math.isnan(value) else value


def expected_fields(info: Any, bands: dict[str, str]) -> dict[str, Any]:
    """The dataset's data id and the exposure record's fields obs_lsst's ``info`` implies."""
    radec, altaz = info.tracking_radec, info.altaz_begin
    return {
        "instrument": info.instrument,
        "exposure": info.exposure_id,
        "detector": info.detector_num,
        "obs_id": info.observation_id,
        "group_name": info.exposure_group,
        "day_obs": info.observing_day,
        "seq_num": info.observation_counter,
        "physical_filter": info.physical_filter,
        "band": bands.get(info.physical_filter, UNDEFINED),
        "obs_start": _utc(info.datetime_begin),
        "obs_end": _utc(info.datetime_end),
        "exposure_time": _value(info.exposure_time, "s"),
        "dark_time": _value(info.dark_time, "s"),
        "observation_type": info.observation_type,
        "observation_reason": info.observation_reason,
        "science_program": info.science_program,
        "target_name": info.object,
        "sky_angle": _value(info.boresight_rotation_angle, "deg"),
        "can_see_sky": info.can_see_sky,
        "has_simulated": info.has_simulated_content,
        "tracking_ra": None if radec is None else float(radec.icrs.ra.deg),
        "tracking_dec": None if radec is None else float(radec.icrs.dec.deg),
        "azimuth": None if altaz is None else float(altaz.az.deg),
        "zenith_angle": None if altaz is None else float(altaz.zen.deg),
    }
