"""Header times carry their scale: TAI as the camera writes it, UTC where TIMESYS is absent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsingest.timescales import camera_time, header_instant, header_time, tai_minus_utc, utc_time

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
    assert tai_minus_utc(datetime(2026, 11, 23, tzinfo=UTC)) == 37.0
    assert tai_minus_utc(datetime(2016, 6, 1, tzinfo=UTC)) == 36.0  # before the 2016-12-31 one
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
