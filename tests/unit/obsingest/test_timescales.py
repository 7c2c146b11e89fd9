"""Header times carry their scale: TAI as the camera writes it, UTC where TIMESYS is absent."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from astropy.time import Time

from obsingest.timescales import camera_time, header_instant, header_time, time_as_utc, utc_time, utc_to_tai

pytestmark = pytest.mark.unit


def test_a_tai_header_time_is_37_s_ahead_of_the_utc_instant() -> None:
    """The real LSSTCam header MC_O_20250415_000060: Rubin's translator gives this UTC begin."""
    begin = header_instant("2025-04-16T00:53:13.573", "TAI")
    assert begin == datetime(2025, 4, 16, 0, 52, 36, 573000, tzinfo=UTC)
    assert header_instant(60781.03696264839, "TAI") - begin < timedelta(milliseconds=1)


def test_without_timesys_a_header_time_is_utc() -> None:
    for timesys in (None, "", "UTC", "utc "):
        assert header_instant("2025-04-16T00:53:13.573", timesys) == datetime(
            2025, 4, 16, 0, 53, 13, 573000, tzinfo=UTC
        )
    assert header_instant("2025-04-16T00:53:13.573Z") == header_instant("2025-04-16T00:53:13.573")


def test_the_offset_follows_the_leap_seconds() -> None:
    for instant, seconds in ((datetime(2026, 11, 23), 37), (datetime(2016, 6, 1), 36)):
        # 36 s before the leap second of 2016-12-31; astropy's table is the reference
        assert utc_to_tai(instant.replace(tzinfo=UTC)) - instant == timedelta(seconds=seconds)
        t = utc_time(instant.replace(tzinfo=UTC))
        assert round((t.tai.mjd - t.mjd) * 86400.0) == seconds
    assert header_time("2016-06-01T00:00:36.000", "TAI").utc.isot == "2016-06-01T00:00:00.000"


def test_camera_time_writes_a_utc_instant_as_the_camera_does() -> None:
    isot, mjd = camera_time(datetime(2025, 4, 16, 0, 52, 36, 573000, tzinfo=UTC))
    assert isot == "2025-04-16T00:53:13.573"
    assert abs(mjd - 60781.03696264839) * 86400 < 1e-3
    assert header_instant(isot, "TAI") == datetime(2025, 4, 16, 0, 52, 36, 573000, tzinfo=UTC)


def test_unknown_scales_bad_times_and_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="TIMESYS='GPS'"):
        header_instant("2025-04-16T00:53:13.573", "GPS")
    with pytest.raises(ValueError, match="not an ISO time"):
        header_instant("yesterday", "TAI")
    with pytest.raises(ValueError, match="naive"):
        utc_time(datetime(2025, 4, 16))


def _random_instants(n: int) -> list[float]:
    """MJDs from 1972 (integer leap seconds) to the table's end, every leap-second day's last
    and first minutes included."""
    import erfa

    rng = random.Random(19)
    days = [rng.uniform(41317.0, 61500.0) for _ in range(n)]
    for year, month, _ in erfa.leap_seconds.get():
        if year >= 1972:
            start = Time(f"{int(year)}-{int(month):02d}-01", scale="utc").mjd
            days += [start - 1 / 1440, start - 1e-6, start, start + 1 / 86400, start + 1 / 1440]
    return days


def test_the_leap_second_table_converts_as_astropy_does_over_many_dates() -> None:
    checked = 0
    for mjd in _random_instants(400):
        for scale in ("tai", "utc"):
            t = Time(mjd, format="mjd", scale=scale)
            try:
                expected = t.utc.to_datetime(timezone=UTC)
            except ValueError:  # a TAI instant inside an inserted second: no datetime names it
                continue
            assert time_as_utc(t) == expected, (scale, mjd)
            checked += 1
        try:
            utc = Time(mjd, format="mjd", scale="utc").to_datetime(timezone=UTC)
        except ValueError:  # inside an inserted second
            continue
        assert utc_to_tai(utc) == Time(utc.replace(tzinfo=None), scale="utc").tai.to_datetime()
    assert checked > 900


def test_instants_outside_the_table_are_converted_by_astropy() -> None:
    before = Time("1965-03-01T00:00:00", scale="tai")  # rubber seconds: not a whole offset
    assert time_as_utc(before) == before.utc.to_datetime(timezone=UTC)
    assert time_as_utc(Time(60781.5, format="mjd", scale="tt")) == Time(
        60781.5, format="mjd", scale="tt"
    ).utc.to_datetime(timezone=UTC)
