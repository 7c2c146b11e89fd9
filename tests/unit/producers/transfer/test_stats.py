"""Harness statistics: the observatory report's columns, warm-up apart, stage breakdown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from producers.transfer.stats import (
    Arrival,
    TransferRecord,
    aggregate_mbit_s,
    format_stage_table,
    format_transfer_table,
    latency_summary,
    split_warmup,
    stage_breakdown,
    transfer_row,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC)
MB15 = 15_137_280


def rec(
    exposure_index: int,
    detector: int,
    start: float,
    seconds: float,
    send: float | None = None,
    size: int = MB15,
    error: str = "",
) -> TransferRecord:
    begin = T0 + timedelta(seconds=start)
    end = begin + timedelta(seconds=seconds)
    compressed = end - timedelta(seconds=seconds if send is None else send)
    return TransferRecord(
        data_id=f"LSSTCam/{exposure_index}/{detector:03d}",
        worker=detector,
        detector=detector,
        exposure=2026010200001 + exposure_index,
        exposure_index=exposure_index,
        readout=begin,
        start=begin,
        read_end=begin,
        compressed=compressed,
        end=end,
        bytes=size,
        raw_bytes=75_582_720,
        status="failed" if error else "stored",
        error=error,
    )


def test_aggregate_bandwidth_matches_the_report_arithmetic():
    # The report: 16 CCDs of ~15.1 MB, the slowest at 1.53 s -> ~1270 Mbit/s.
    records = [rec(0, d, 0.0, 1.53 if d == 0 else 0.9) for d in range(16)]
    assert aggregate_mbit_s(records) == pytest.approx(16 * MB15 * 8 / 1e6 / 1.53)
    assert round(aggregate_mbit_s(records), -1) == 1270


def test_aggregate_bandwidth_spans_staggered_starts_and_skips_failures():
    records = [rec(0, 0, 0.0, 1.0), rec(0, 1, 1.0, 1.0), rec(0, 2, 0.0, 9.0, error="boom")]
    assert aggregate_mbit_s(records) == pytest.approx(2 * MB15 * 8 / 1e6 / 2.0)
    assert aggregate_mbit_s([rec(0, 0, 0.0, 1.0, error="x")]) == 0.0


def test_first_exposure_is_split_off():
    records = [rec(i, d, 17.0 * i, 1.0) for i in range(3) for d in range(2)]
    warm, rest = split_warmup(records)
    assert {r.exposure_index for r in warm} == {0}
    assert {r.exposure_index for r in rest} == {1, 2}
    assert split_warmup([]) == ([], [])


def test_transfer_row_min_mean_max_and_send_times():
    records = [
        rec(1, 0, 17.0, 1.0, send=0.5),
        rec(1, 1, 17.0, 2.0, send=0.7),
        rec(2, 0, 34.0, 3.0, send=0.9),
        rec(2, 1, 34.0, 1.0, send=0.3, error="timeout"),
    ]
    row = transfer_row(2, records)
    assert row is not None
    assert (row.ccds, row.exposures, row.transfers, row.failed) == (2, 2, 3, 1)
    assert (row.min, row.mean, row.max) == pytest.approx((1.0, 2.0, 3.0))
    assert (row.send_min, row.send_max) == pytest.approx((0.5, 0.9))
    per_exposure = [2 * MB15 * 8 / 1e6 / 2.0, MB15 * 8 / 1e6 / 3.0]
    assert row.mbit_s == pytest.approx(sum(per_exposure) / 2)


def test_transfer_row_of_nothing_is_none():
    assert transfer_row(4, []) is None
    assert transfer_row(4, [rec(0, 0, 0, 1, error="x")]) is None


def test_record_json_has_iso_times():
    record = rec(1, 3, 17.0, 1.25, send=0.5)
    data = record.to_json()
    assert data["start"] == record.start.isoformat() and data["end"] == record.end.isoformat()
    assert data["bytes"] == record.bytes
    assert record.seconds == pytest.approx(1.25)
    assert record.send_seconds == pytest.approx(0.5)


def arrival(detector: int, steps: list[float], exposure: int = 1) -> Arrival:
    t = [T0 + timedelta(seconds=sum(steps[: i + 1])) for i in range(len(steps))]
    return Arrival(exposure, detector, T0, t[0], t[1], t[2], t[3], t[4])


def test_stage_breakdown_says_where_the_time_goes():
    arrivals = [arrival(0, [1.0, 0.5, 0.2, 0.1, 0.05]), arrival(1, [2.0, 1.5, 0.4, 0.1, 0.05])]
    rows = {r.stage: r for r in stage_breakdown(arrivals)}
    assert list(rows) == [
        "read+compress",
        "send+store",
        "notify+register",
        "publish",
        "deliver",
        "readout->announced",
    ]
    assert rows["read+compress"].p50 == pytest.approx(1.5)
    assert rows["read+compress"].max == pytest.approx(2.0)
    assert rows["send+store"].max == pytest.approx(1.5)
    assert rows["readout->announced"].max == pytest.approx(4.0)
    assert rows["readout->announced"].count == 2


def test_stage_breakdown_skips_missing_timestamps():
    a = Arrival(
        1, 0, T0, None, None, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2), T0 + timedelta(seconds=2)
    )
    stages = [r.stage for r in stage_breakdown([a])]
    assert stages == ["publish", "deliver", "readout->announced"]
    assert stage_breakdown([]) == []


def test_latency_summary_against_budget():
    arrivals = [arrival(d, [1.0, 1.0, 1.0, 1.0 + d, 0.0]) for d in range(3)]
    summary = latency_summary(arrivals, expected=3, budget=5.0)
    assert (summary.announced, summary.over_budget) == (3, 1)  # 5.0 s itself is within
    assert summary.max == pytest.approx(6.0)
    missing = latency_summary(arrivals[:1], expected=3, budget=5.0)
    assert missing.over_budget == 0
    empty = latency_summary([], expected=0, budget=5.0)
    assert empty.p50 is None


def test_tables_have_the_report_columns():
    row = transfer_row(1, [rec(1, 0, 0.0, 1.0, send=0.4)])
    assert row is not None
    text = format_transfer_table([row])
    assert text.splitlines()[0].startswith("| CCDs | exposures | min s | mean s | max s | Mbit/s")
    assert "| 1 | 1 | 1.00 | 1.00 | 1.00 | 121 |" in text
    stages = format_stage_table(stage_breakdown([arrival(0, [1.0, 0.5, 0.2, 0.1, 0.05])]))
    assert "| read+compress | 1 | 1.000 | 1.000 |" in stages
