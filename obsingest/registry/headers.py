"""The exposure dimension record from a raw's primary header (``obsingest.translate``: what
Rubin's raw ingest would record), validated against its data id. Refused: no identity or a string
longer than the Butler's column (``BadHeader``), a contradiction of the data id
(``HeaderMismatch``). An unusable card takes the translator's default; the warning is kept
(``header_warnings``) and counted (``obsingest_header_warnings_total``).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import astropy.units as u

from obsingest import camera, translate
from obsingest.dataid import EXPOSURE_SEQ_FACTOR, DataId
from obsingest.errors import CorruptFile, HeaderMismatch
from obsingest.fits import Hdu
from obsingest.registry.registry import ExposureRecord
from obsingest.timescales import time_as_utc

#: the record's strings: the card each comes from (named when too long) and the length of its
#: Butler column (daf_butler dimensions.yaml, universe 8)
_LENGTHS = {
    "obs_id": ("OBSID", 64),
    "group_name": ("GROUPID", 64),
    "physical_filter": ("FILTER", 32),
    "band": ("FILTER", 32),
    "observation_type": ("IMGTYPE", 16),
    "observation_reason": ("REASON", 68),
    "science_program": ("PROGRAM", 64),
    "target_name": ("OBJECT", 64),
}


class BadHeader(HeaderMismatch, reason="bad-header"):
    """A header gives no identity, or a value the registry cannot keep."""


def exposure_from_header(primary: Hdu, data_id: DataId, name: str) -> ExposureRecord:
    """The exposure record of ``data_id`` from its raw's primary header."""
    try:
        result = translate.observation(translate.HduHeader(primary))
    except translate.NoIdentity as exc:
        raise BadHeader(f"object {name!r}: {exc}") from None
    except CorruptFile as exc:
        raise BadHeader(f"object {name!r}: {exc}") from None
    _check_identity(result, primary, data_id, name)
    # the exposure's CCDs share ``info``: its record is built and checked once (the info is kept
    # with it, so its id cannot be reused while cached)
    key = (id(result.info), data_id.instrument, data_id.exposure, result.warnings)
    with _RECORDS_LOCK:
        cached = _RECORDS.get(key)
    if cached is not None and cached[0] is result.info:
        record = cached[1]
    else:
        record = _record(result, data_id, name)
        with _RECORDS_LOCK:
            _RECORDS[key] = (result.info, record)
            while len(_RECORDS) > 32:
                _RECORDS.popitem(last=False)
    _count_warnings(data_id.instrument, len(record.header_warnings))
    return record


def _check_identity(result: translate.Translation, primary: Hdu, data_id: DataId, name: str) -> None:
    ident = result.identity
    where = f"object {name!r}: header"
    if ident.instrument != data_id.instrument:
        raise HeaderMismatch(
            f"{where} INSTRUME={primary.str_value('INSTRUME')!r} is {ident.instrument}, "
            f"not {data_id.instrument}"
        )
    if ident.exposure_id != data_id.exposure:
        seq_num = data_id.exposure % EXPOSURE_SEQ_FACTOR
        if ident.observation_counter != seq_num:
            key, field, expected = "SEQNUM", "seq_num", seq_num
        else:
            key, field, expected = "DAYOBS", "day_obs", data_id.day_obs
        raise HeaderMismatch(
            f"{where} {key}={primary.str_value(key)!r} (exposure {ident.exposure_id}) but "
            f"exposure {data_id.exposure} has {field} {expected}"
        )
    det = camera.detector(data_id.instrument, data_id.detector)
    found = f"{ident.detector_group}_{ident.detector_name}"
    if ident.detector_num != data_id.detector:
        raise HeaderMismatch(
            f"{where} RAFTBAY/CCDSLOT={found!r} but detector {data_id.detector} of "
            f"{data_id.instrument} is {det.full_name}"
        )
    detname = primary.str_value("DETNAME")
    if camera.instrument(data_id.instrument).has_rafts and detname not in (None, det.full_name):
        raise HeaderMismatch(
            f"{where} DETNAME={detname!r} but detector {data_id.detector} of "
            f"{data_id.instrument} is {det.full_name}"
        )


def _record(result: translate.Translation, data_id: DataId, name: str) -> ExposureRecord:
    """The checked record: a string longer than its Butler column is a ``BadHeader``; a value
    that cannot be converted, or no text where text is kept, is unknown, with a warning."""
    ident = result.identity
    warnings = list(result.warnings)
    record = ExposureRecord(
        instrument=data_id.instrument,
        exposure=data_id.exposure,
        day_obs=ident.observing_day,
        obs_id=ident.observation_id,
        group_name=ident.exposure_group,
        seq_num=ident.observation_counter,
        **_exposure_fields(result.info, warnings),
    )
    unknown: dict[str, Any] = {}
    for field, (card, limit) in _LENGTHS.items():
        value = getattr(record, field)
        if value is not None and not isinstance(value, str):
            warnings.append(f"header {card} gives {value!r}, not text: {field} left unknown")
            unknown[field] = None
        elif value is not None and len(value) > limit:
            raise BadHeader(
                f"object {name!r}: header {card} gives a {field} of {len(value)} "
                f"characters, the Butler keeps at most {limit}: {value[:40]!r}..."
            )
    return replace(record, header_warnings=tuple(warnings), **unknown)


_RECORDS: OrderedDict[tuple[Any, ...], tuple[Any, ExposureRecord]] = OrderedDict()
_RECORDS_LOCK = threading.Lock()


def _exposure_fields(info: Any, warnings: list[str]) -> dict[str, Any]:
    def usable(field: str, convert: Callable[[], Any]) -> Any:
        """``convert()``; None, with a warning, when the translated value cannot be converted."""
        try:
            return convert()
        except (ArithmeticError, AttributeError, TypeError, ValueError) as exc:
            warnings.append(f"{field}: {type(exc).__name__}: {exc}; left unknown")
            return None

    radec = info.tracking_radec
    if radec is not None and radec.frame.name != "icrs":  # the cameras write ICRS already
        radec = radec.icrs
    altaz = info.altaz_begin
    return {
        "obs_start": usable("obs_start", lambda: _utc(info.datetime_begin)),
        "obs_end": usable("obs_end", lambda: _utc(info.datetime_end)),
        "exposure_time": usable("exposure_time", lambda: _number(info.exposure_time, u.s)),
        "dark_time": usable("dark_time", lambda: _number(info.dark_time, u.s)),
        "physical_filter": info.physical_filter,
        "band": translate.band(info.physical_filter),
        "observation_type": info.observation_type,
        "observation_reason": info.observation_reason,
        "tracking_ra": None if radec is None else _finite(radec.ra.deg),
        "tracking_dec": None if radec is None else _finite(radec.dec.deg),
        "sky_angle": _number(info.boresight_rotation_angle, u.deg),
        "azimuth": None if altaz is None else _finite(altaz.az.deg),
        # AltAz.zen is 90 degrees - alt, computed here without a frame attribute lookup
        "zenith_angle": None if altaz is None else _finite(90.0 - float(altaz.alt.deg)),
        "science_program": info.science_program,
        "target_name": info.object,
        "has_simulated": info.has_simulated_content,
        "can_see_sky": info.can_see_sky,
    }


def _utc(t: Any) -> datetime | None:
    """The instant ``t`` (any astropy scale) as a UTC datetime: converted, never relabelled
    (``timescales.time_as_utc``: the leap-second table, not astropy's ~1 ms conversion)."""
    return None if t is None else time_as_utc(t)


def _number(q: Any, unit: u.Unit) -> float | None:
    """A quantity's value in ``unit``; None for none or NaN (LATISS's unknown rotation)."""
    return None if q is None else _finite(q.to_value(unit))


def _finite(value: Any) -> float | None:
    """A finite number, else None: a NaN the database keeps as NULL (SQLite) would differ from
    the record at the Butler's next sync of it, an infinity is no angle or time."""
    number = float(value)
    return number if math.isfinite(number) else None


def _count_warnings(instrument: str, n: int) -> None:
    if n:
        from obsingest.metrics import get_metrics

        get_metrics().header_warnings(instrument, n)
