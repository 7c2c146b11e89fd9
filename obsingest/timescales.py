"""Time scales: header times carry theirs (the camera writes TAI), the pipeline's instants are UTC.

``header_instant`` reads a header time as the UTC instant it names (no TIMESYS means UTC, per
FITS); ``camera_time`` writes a UTC instant as the camera does. astropy is slow per instant, so
``time_as_utc`` and ``utc_to_tai`` use erfa's leap-second table directly (exact: TAI - UTC is whole
seconds); instants outside the table and other scales go through astropy.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast, overload

if TYPE_CHECKING:
    from astropy.time import Time

#: The scale every instant inside the pipeline is in (and the one latency figures are given in).
PIPELINE_SCALE = "UTC"
#: The scale the Rubin cameras write DATE-BEG/DATE-END/DATE-OBS and MJD-* in.
CAMERA_SCALE = "TAI"
#: FITS time scales astropy reads (``TIMESYS`` values; GPS and others are refused, not guessed).
_SCALES = {"UTC": "utc", "TAI": "tai", "TT": "tt", "TDB": "tdb", "TCG": "tcg", "TCB": "tcb"}


def header_time(value: str | float, timesys: str | None = None) -> Time:
    """A header time (ISOT text, or an MJD number) as an astropy Time in the scale TIMESYS
    names (UTC when the card is absent or empty); ValueError if it is not a time."""
    from astropy.time import Time

    scale = _SCALES.get((timesys or "").strip().upper() or "UTC")
    if scale is None:
        raise ValueError(f"TIMESYS={timesys!r} is not a time scale we read")
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return Time(float(value), format="mjd", scale=scale)
        text = str(value).strip().removesuffix("Z")
        return Time(text, format="isot", scale=scale)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an ISO time or MJD: {exc}") from None


def header_instant(value: str | float, timesys: str | None = None) -> datetime:
    """The UTC instant a header time names (``DATE-BEG`` with its ``TIMESYS``), timezone-aware."""
    return cast(datetime, header_time(value, timesys).utc.to_datetime(timezone=UTC))


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


#: Julian date of 2000-01-01T12:00 (in any scale: the epoch the Time's two-part JD counts from)
_J2000_JD = 2451545.0
_J2000 = datetime(2000, 1, 1, 12)
#: from 1972 on, TAI - UTC is a whole number of seconds (before it, UTC had rubber seconds)
_INTEGER_LEAPS_FROM = datetime(1972, 1, 1)


@dataclass(frozen=True)
class _LeapTable:
    #: naive UTC instants from which ``offsets[i]`` holds, ascending
    utc_starts: tuple[datetime, ...]
    #: the same instants in TAI (``utc_starts[i] + offsets[i]``)
    tai_starts: tuple[datetime, ...]
    offsets: tuple[timedelta, ...]
    #: the table says nothing from here on (astropy would warn, or fetch a newer one)
    expires: datetime


@lru_cache(maxsize=1)
def _leap_table() -> _LeapTable:
    """erfa's leap-second table as astropy has updated it (one astropy conversion loads it)."""
    import erfa
    from astropy.time import Time

    Time(59000.0, format="mjd", scale="utc").tai  # noqa: B018 - astropy updates erfa's table
    rows = [
        (datetime(int(year), int(month), 1), timedelta(seconds=float(offset)))
        for year, month, offset in erfa.leap_seconds.get()
        if datetime(int(year), int(month), 1) >= _INTEGER_LEAPS_FROM
    ]
    return _LeapTable(
        utc_starts=tuple(start for start, _ in rows),
        tai_starts=tuple(start + offset for start, offset in rows),
        offsets=tuple(offset for _, offset in rows),
        expires=erfa.leap_seconds.expires.replace(tzinfo=None),
    )


def tai_to_utc(tai: datetime) -> datetime | None:
    """A naive TAI instant as a UTC datetime (timezone-aware) by the leap-second table; None
    outside the table's range."""
    table = _leap_table()
    i = bisect_right(table.tai_starts, tai) - 1
    if i < 0:
        return None
    utc = tai - table.offsets[i]
    if utc >= table.expires:
        return None
    return utc.replace(tzinfo=UTC)


def utc_to_tai(instant: datetime) -> datetime:
    """A timezone-aware instant as naive TAI, by the leap-second table (astropy outside it)."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{instant!r} is naive: say its zone")
    utc = instant.astimezone(UTC).replace(tzinfo=None)
    table = _leap_table()
    i = bisect_right(table.utc_starts, utc) - 1
    if i < 0 or utc >= table.expires:
        return cast(datetime, utc_time(instant).tai.to_datetime())
    return utc + table.offsets[i]


def time_as_utc(t: Any) -> datetime:
    """An astropy ``Time`` (one instant, any scale) as the UTC instant it names, timezone-aware:
    converted (never relabelled), from the leap-second table for TAI and UTC times, which gives
    what ``t.utc.to_datetime(timezone=UTC)`` gives at a fraction of the cost."""
    scale = t.scale
    if scale in ("tai", "utc") and t.isscalar:
        # the two-part JD's calendar instant, rounded as ``Time.to_datetime`` rounds (astropy keeps
        # jd1 a whole number and jd2 in [-0.5, 0.5])
        naive = _J2000 + timedelta(days=float(t.jd1) - _J2000_JD) + timedelta(days=float(t.jd2))
        if scale == "utc" and naive >= _INTEGER_LEAPS_FROM:
            # a UTC day ending in a leap second counts 86401 s in astropy's day fraction
            next_day = datetime(naive.year, naive.month, naive.day) + timedelta(days=1)
            if next_day not in _leap_table().utc_starts:
                return naive.replace(tzinfo=UTC)
        if scale == "tai":
            utc = tai_to_utc(naive)
            if utc is not None:
                return utc
    return cast(datetime, t.utc.to_datetime(timezone=UTC))


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """An instant as an aware UTC datetime; a naive one (as databases return them) is UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_utc(text: str) -> datetime:
    """An ISO 8601 / RFC 3339 time (``Z``, an offset, or none: UTC) as an aware UTC datetime;
    ValueError if it is none or names no UTC instant (year 1 at +14:00)."""
    try:
        return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except OverflowError as exc:
        raise ValueError(f"{text!r} names no UTC instant") from exc
