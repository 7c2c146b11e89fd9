"""Butler dimension records (daf_butler universe 8) from what obsingest keeps, as plain dicts.

Pure, no daf_butler import: the Butler backend and the export make DimensionRecords of them
(timespans in TAI). Values are what obs_lsst would write for the same raws: instrument and
detector records from ``obsingest.camera``, the exposure's from its header-derived record.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from obsingest import camera
from obsingest.registry.registry import ExposureRecord
from obsingest.timescales import utc_to_tai

#: obs_lsst's day_obs offset for the Simonyi telescope and ComCam/LATISS: the observing day
#: rolls over at 12:00 (LsstCamTranslator.observing_date_to_offset)
DAY_OBS_OFFSET = timedelta(hours=12)
#: obs_lsst's placeholder filter for a raw without one (filters.py ``unknown``)
UNKNOWN_FILTER = "unknown"

Record = dict[str, Any]


def instrument_records(instrument: str) -> tuple[Record, list[Record]]:
    """(instrument record, detector records) of ``instrument``, as obs_lsst registers them."""
    inst = camera.instrument(instrument)
    return inst.record(), [inst.detector_record(d) for d in inst.detector_ids]


def day_obs_timespan(day_obs: int) -> tuple[datetime, datetime]:
    """The [begin, end) of an observing day: YYYY-MM-DD 12:00 to the next day's 12:00."""
    day = datetime.strptime(str(day_obs), "%Y%m%d").replace(tzinfo=UTC)
    return day + DAY_OBS_OFFSET, day + DAY_OBS_OFFSET + timedelta(days=1)


def exposure_records(exp: ExposureRecord) -> dict[str, Record]:
    """The records an exposure needs, by element: physical_filter, group, day_obs, exposure;
    ``timespan`` values are (begin, end) UTC datetimes or None."""
    inst = camera.instrument(exp.instrument)
    seq_num = exp.seq_num if exp.seq_num is not None else exp.exposure % 100_000
    physical_filter = exp.physical_filter or UNKNOWN_FILTER
    band = exp.band or (UNKNOWN_FILTER if physical_filter == UNKNOWN_FILTER else None)
    if band is None:
        band = next((b for b, f in inst.filters.items() if f == physical_filter), physical_filter)
    group = exp.group_name or str(exp.exposure)
    begin = exp.obs_start
    end = exp.obs_end
    if end is None and begin is not None and exp.exposure_time is not None:
        end = begin + timedelta(seconds=exp.exposure_time)
    return {
        "physical_filter": {"instrument": exp.instrument, "name": physical_filter, "band": band},
        "group": {"instrument": exp.instrument, "name": group},
        "day_obs": {
            "instrument": exp.instrument,
            "id": exp.day_obs,
            "timespan": day_obs_timespan(exp.day_obs),
        },
        "exposure": {
            "instrument": exp.instrument,
            "id": exp.exposure,
            "obs_id": exp.obs_id or f"{inst.obsid_prefix}_O_{exp.day_obs}_{seq_num:06d}",
            "physical_filter": physical_filter,
            "group": group,
            "day_obs": exp.day_obs,
            "exposure_time": exp.exposure_time,
            "dark_time": exp.dark_time,
            "observation_type": exp.observation_type or "unknown",
            "observation_reason": exp.observation_reason or "unknown",
            "seq_num": seq_num,
            "seq_start": seq_num,
            "seq_end": seq_num,
            "target_name": exp.target_name,
            "science_program": exp.science_program,
            "tracking_ra": exp.tracking_ra,
            "tracking_dec": exp.tracking_dec,
            "sky_angle": exp.sky_angle,
            "azimuth": exp.azimuth,
            "zenith_angle": exp.zenith_angle,
            "has_simulated": exp.has_simulated,
            "can_see_sky": exp.can_see_sky,
            "timespan": (begin, end) if begin is not None and end is not None else None,
        },
    }


def with_timespan(record: dict[str, Any]) -> dict[str, Any]:
    """(begin, end) UTC datetimes -> a Butler Timespan (TAI, as daf_butler stores times)."""
    value = record.get("timespan")
    if value is None:
        return record
    from astropy.time import Time
    from lsst.daf.butler import Timespan

    # TAI from the leap-second table (timescales.utc_to_tai): the same nanoseconds as astropy's
    # Time(utc).tai, at half the cost
    begin, end = (Time(utc_to_tai(naive_utc(t).replace(tzinfo=UTC)), scale="tai") for t in value)
    return {**record, "timespan": Timespan(begin, end)}


def naive_utc(t: datetime) -> datetime:
    """Naive UTC for astropy; a naive value (SQLite gives them back) is UTC already."""
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)
