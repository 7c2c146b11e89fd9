"""Time scales: header times carry theirs, the pipeline's instants are UTC.

The camera writes its header times (DATE-BEG, DATE-END, DATE-OBS, MJD-*) in TAI and says so with
``TIMESYS = 'TAI'``; TAI runs 37 s ahead of UTC (since 2017; astropy's leap-second table knows
every offset). Everything the pipeline measures or sends (readout time, ingest time, ArrivalEvent
and ExposureSummary timestamps, every latency) is a UTC instant (``datetime`` with tzinfo UTC,
Avro ``timestamp-micros``), so a header time is converted once, here, with its scale explicit:
``header_instant`` reads one as the UTC instant it names (a header without TIMESYS is UTC, as
the FITS standard says), ``camera_time`` writes a UTC instant as the camera does (TAI ISOT and
MJD). Mixing the two silently put every registered timespan 37 s late before.

astropy is imported on first use only: the modules that import this one for its constants stay
light.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from astropy.time import Time

#: The scale every instant inside the pipeline is in (and the one latency figures are given in).
PIPELINE_SCALE = "UTC"
#: The scale the Rubin cameras write DATE-BEG/DATE-END/DATE-OBS and MJD-* in.
CAMERA_SCALE = "TAI"
#: FITS time scales astropy reads (``TIMESYS`` values; GPS and others are refused, not guessed).
_SCALES = {"UTC": "utc", "TAI": "tai", "TT": "tt", "TDB": "tdb", "TCG": "tcg", "TCB": "tcb"}


def _scale(timesys: str | None) -> str:
    """astropy's name of the scale ``TIMESYS`` names: UTC when the card is absent or empty."""
    key = (timesys or "").strip().upper() or "UTC"
    try:
        return _SCALES[key]
    except KeyError:
        raise ValueError(f"TIMESYS={timesys!r} is not a time scale we read") from None


def header_time(value: str | float, timesys: str | None = None) -> Time:
    """A header time (ISOT text, or an MJD number) as an astropy Time in the scale TIMESYS
    names; ValueError if it is not a time."""
    from astropy.time import Time

    scale = _scale(timesys)
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return Time(float(value), format="mjd", scale=scale)
        text = str(value).strip().removesuffix("Z")
        return Time(text, format="isot", scale=scale)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an ISO time or MJD: {exc}") from None


def header_instant(value: str | float, timesys: str | None = None) -> datetime:
    """The UTC instant a header time names (``DATE-BEG`` with its ``TIMESYS``), timezone-aware."""
    return header_time(value, timesys).utc.to_datetime(timezone=UTC)


def utc_time(instant: datetime) -> Time:
    """A timezone-aware instant as an astropy Time in UTC (naive is refused, never assumed)."""
    from astropy.time import Time

    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{instant!r} is naive: say its zone")
    return Time(instant.astimezone(UTC).replace(tzinfo=None), scale="utc")


@lru_cache(maxsize=4096)
def camera_time(instant: datetime) -> tuple[str, float]:
    """(ISOT to milliseconds, MJD) of a UTC instant in TAI, as the camera writes DATE-BEG and
    MJD-BEG. Cached: every CCD of an exposure carries the same few instants."""
    tai = utc_time(instant).tai
    return tai.isot[:23], float(tai.mjd)


def tai_minus_utc(instant: datetime) -> float:
    """Seconds TAI is ahead of UTC at ``instant`` (37.0 since 2017-01-01)."""
    t = utc_time(instant)
    return round(float((t.tai.mjd - t.mjd) * 86400.0), 3)
