"""The exposure dimension record from a raw's primary header, validated against its data id.

The Butler's exposure record (obs id, group, day_obs, seq_num, physical filter, observation type,
exposure and dark time, timespan, tracking RA/Dec, sky angle, ...) is read from the keywords LSST
raws carry, as obs_lsst's LSSTCam translator reads them: OBSID, GROUPID, DAYOBS, SEQNUM, FILTER,
FILTBAND, IMGTYPE, REASON, EXPTIME, DARKTIME, DATE-BEG/DATE-END (DATE-OBS), RASTART/DECSTART (or
RA/DEC), ROTPA, AZSTART, ELSTART, PROGRAM, OBJECT, CONTRLLR. A header that contradicts the data id
(another detector name, day or sequence number) is a HeaderMismatch; a value that is present but
unusable (a negative exposure time, a declination of 95, a string longer than the Butler's
column) is a BadHeader naming the keyword. Absent keywords fall back as the translator's
defaults do, so files from simpler writers still register.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from obsingest import camera
from obsingest.dataid import EXPOSURE_SEQ_FACTOR, DataId
from obsingest.errors import CorruptFile, HeaderMismatch
from obsingest.fits import Hdu
from obsingest.registry.registry import ExposureRecord

#: obs_lsst's simulated controllers (translators/lsst.py SIMULATED_CONTROLLERS)
_SIMULATED_CONTROLLERS = "HPQS"
#: lengths of the Butler's string columns (daf_butler dimensions.yaml, universe 8)
_LENGTHS = {
    "OBSID": 64,
    "GROUPID": 64,
    "FILTER": 32,
    "FILTBAND": 32,
    "IMGTYPE": 16,
    "REASON": 68,
    "PROGRAM": 64,
    "OBJECT": 64,
}


class BadHeader(HeaderMismatch):
    """A header keyword the registry needs holds a value it cannot use."""

    reason = "bad-header"


def exposure_from_header(primary: Hdu, data_id: DataId, name: str) -> ExposureRecord:
    """The exposure record of ``data_id`` from its raw's primary header (see module doc)."""
    try:
        return _exposure(primary, data_id, name)
    except CorruptFile as exc:  # a keyword that does not parse as its type
        raise BadHeader(f"object {name!r}: {exc}") from None


def _exposure(h: Hdu, data_id: DataId, name: str) -> ExposureRecord:
    inst = camera.instrument(data_id.instrument)
    _check_detector(h, data_id, name)
    seq_num = data_id.exposure % EXPOSURE_SEQ_FACTOR
    for key, field, expected in (
        ("DAYOBS", "day_obs", data_id.day_obs),
        ("SEQNUM", "seq_num", seq_num),
    ):
        found = h.str_value(key)
        if found is not None and found.strip() != str(expected):
            raise HeaderMismatch(
                f"object {name!r}: header {key}={found!r} but exposure {data_id.exposure} "
                f"has {field} {expected}"
            )
    text = {key: _text(h, key, name) for key in _LENGTHS}
    exposure_time = _number(h, "EXPTIME", name, low=0.0)
    dark_time = _number(h, "DARKTIME", name, low=0.0)
    begin = _time(h, "DATE-BEG", name) or _time(h, "DATE-OBS", name)
    end = _time(h, "DATE-END", name)
    if end is None and begin is not None and exposure_time is not None:
        end = begin + timedelta(seconds=exposure_time)
    if begin is not None and end is not None and end < begin:
        raise BadHeader(f"object {name!r}: DATE-END {end.isoformat()} precedes {begin.isoformat()}")
    ra_key, dec_key = ("RASTART", "DECSTART") if h.value("RASTART") else ("RA", "DEC")
    elevation = _number(h, "ELSTART", name, low=-90.0, high=90.0)
    imgtype = (text["IMGTYPE"] or "").lower()
    observation_type = "science" if imgtype == "object" else (imgtype or None)
    physical_filter = text["FILTER"]
    band = text["FILTBAND"] or _band(inst, physical_filter)
    controller = (h.str_value("CONTRLLR") or "").strip()
    return ExposureRecord(
        instrument=data_id.instrument,
        exposure=data_id.exposure,
        day_obs=data_id.day_obs,
        obs_start=begin,
        obs_end=end,
        exposure_time=exposure_time,
        dark_time=dark_time if dark_time is not None else exposure_time,
        physical_filter=physical_filter,
        band=band,
        obs_id=text["OBSID"] or f"{inst.obsid_prefix}_O_{data_id.day_obs}_{seq_num:06d}",
        group_name=text["GROUPID"] or str(data_id.exposure),
        seq_num=seq_num,
        observation_type=observation_type,
        observation_reason=text["REASON"] or "unknown",
        tracking_ra=_number(h, ra_key, name, low=0.0, high=360.0),
        tracking_dec=_number(h, dec_key, name, low=-90.0, high=90.0),
        sky_angle=_number(h, "ROTPA", name, low=-360.0, high=360.0),
        azimuth=_number(h, "AZSTART", name, low=-360.0, high=360.0),
        zenith_angle=None if elevation is None else round(90.0 - elevation, 6),
        science_program=text["PROGRAM"],
        target_name=text["OBJECT"],
        has_simulated=controller in _SIMULATED_CONTROLLERS if controller else None,
        can_see_sky={"science": True, "bias": False, "dark": False}.get(observation_type or ""),
    )


def _check_detector(h: Hdu, data_id: DataId, name: str) -> None:
    det = camera.detector(data_id.instrument, data_id.detector)
    for key, expected in (
        ("DETNAME", det.full_name),
        ("RAFTBAY", det.raft),
        ("CCDSLOT", det.name_in_raft),
    ):
        found = h.str_value(key)
        if found is not None and found.strip() != expected:
            raise HeaderMismatch(
                f"object {name!r}: header {key}={found!r} but detector {data_id.detector} of "
                f"{data_id.instrument} is {det.full_name}"
            )


def _band(inst: camera.Instrument, physical_filter: str | None) -> str | None:
    if not physical_filter:
        return None
    for band, flt in inst.filters.items():
        if flt == physical_filter:
            return band
    return physical_filter if physical_filter in inst.filters else None


def _text(h: Hdu, key: str, name: str) -> str | None:
    value = h.str_value(key)
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > _LENGTHS[key]:
        raise BadHeader(
            f"object {name!r}: header {key} is {len(value)} characters, the Butler keeps "
            f"at most {_LENGTHS[key]}: {value[:40]!r}..."
        )
    return value


def _number(
    h: Hdu, key: str, name: str, low: float | None = None, high: float | None = None
) -> float | None:
    value = h.float_value(key)
    if value is None:
        return None
    if value != value or (low is not None and value < low) or (high is not None and value > high):
        raise BadHeader(
            f"object {name!r}: header {key}={value} is outside {low if low is not None else ''}"
            f"..{high if high is not None else ''}"
        )
    return value


def _time(h: Hdu, key: str, name: str) -> datetime | None:
    value = h.str_value(key)
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadHeader(f"object {name!r}: header {key}={value!r} is not an ISO time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
