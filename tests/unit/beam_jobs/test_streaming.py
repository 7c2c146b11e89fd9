"""The streaming path (stateful DoFn + event-time timer) on Beam's TestStream.

Times are seconds after T0; budget 5 s, grace 5 s, so an exposure read out at 15 s has its
deadline at 25 s. Each test is one small pipeline (about a second on the DirectRunner).
"""

from __future__ import annotations

import json

import pytest

from beam_jobs.transforms import EXPIRED_MEMORY, SummaryConfig
from obsingest.messages import ExposureManifest, SummaryStatus
from tests.unit.beam_jobs.helpers import Step, arrival, exposure_id, manifest, run_stream

pytestmark = pytest.mark.unit


def brief(summaries):  # (exposure seq, revision, trigger, status, arrived, missing)
    return [
        (s.exposure - exposure_id(0), s.revision, s.trigger, s.status, s.arrived, s.missing_detectors)
        for s in summaries
    ]


def test_out_of_order_duplicates_and_all_arrived_before_deadline() -> None:
    summaries, alerts = run_stream(
        [
            Step([manifest(1, range(3)), arrival(1, 2, 15.2, 2.0), arrival(1, 0, 15.0, 3.0)]),
            Step([arrival(1, 0, 15.0, 3.5)], watermark=17),  # redelivered duplicate
            Step([arrival(1, 1, 15.1, 1.0)], watermark=18),  # last one: emits at once
            Step([arrival(1, 1, 15.1, 1.0)], watermark=40),  # duplicate after emission: no revision
        ]
    )
    assert brief(summaries) == [(1, 0, "all-arrived", SummaryStatus.OK, 3, [])]
    assert summaries[0].latency_max == pytest.approx(3.0)
    assert alerts == []


def test_missing_ccd_at_deadline_then_late_arrival_revises() -> None:
    summaries, alerts = run_stream(
        [
            Step([manifest(1, range(3)), arrival(1, 0, 15, 1.0), arrival(1, 1, 15, 2.0)]),
            Step(watermark=24.9),  # deadline 25 not passed: nothing yet
            Step(watermark=26),
            Step([arrival(1, 2, 15, 20.0)], watermark=40),  # late: revision 1, over budget
            Step([arrival(1, 2, 15, 25.0)], watermark=50),  # later duplicate: nothing new
        ]
    )
    assert brief(summaries) == [
        (1, 0, "deadline", SummaryStatus.INCOMPLETE, 2, [2]),
        (1, 1, "late-arrival", SummaryStatus.OVER_BUDGET, 3, []),
    ]
    assert summaries[1].over_budget == [2] and summaries[1].latency_max == pytest.approx(20.0)
    assert [(a.revision, a.status) for a in alerts] == [
        (0, SummaryStatus.INCOMPLETE),
        (1, SummaryStatus.OVER_BUDGET),
    ]


def test_deadline_waits_for_the_watermark_not_for_elements() -> None:
    summaries, _ = run_stream(
        [
            Step([manifest(1, range(2)), arrival(1, 0, 15, 1.0)], watermark=24),
            Step([arrival(1, 1, 15, 4.0)], watermark=30),  # before the deadline: counts, all-arrived
        ]
    )
    assert brief(summaries) == [(1, 0, "all-arrived", SummaryStatus.OK, 2, [])]


def test_interleaved_exposures_and_arrivals_before_manifests() -> None:
    summaries, _ = run_stream(
        [
            Step([arrival(2, 0, 32, 1.0), arrival(1, 1, 15, 1.0), arrival(2, 1, 32, 6.0)]),
            Step([arrival(1, 0, 15, 2.0)], watermark=16),
            Step([manifest(2, range(2), start=17.0)], watermark=20),  # after its arrivals
            Step([manifest(1, range(3))], watermark=21),
            Step(watermark=60),
        ]
    )
    by_exposure = {s.exposure - exposure_id(0): s for s in summaries}
    assert len(summaries) == 2
    assert brief([by_exposure[2]]) == [(2, 0, "all-arrived", SummaryStatus.OVER_BUDGET, 2, [])]
    assert brief([by_exposure[1]]) == [(1, 0, "deadline", SummaryStatus.INCOMPLETE, 2, [2])]


def test_no_manifest_times_out_then_a_late_manifest_revises() -> None:
    summaries, alerts = run_stream(
        [
            Step([arrival(3, 4, 50, 1.0), arrival(3, 5, 50, 2.0)], watermark=59),
            Step(watermark=61),
            Step([manifest(3, [4, 5], start=35.0)], watermark=70),
        ]
    )
    assert brief(summaries) == [
        (3, 0, "deadline", SummaryStatus.NO_MANIFEST, 2, []),
        (3, 1, "late-arrival", SummaryStatus.OK, 2, []),
    ]
    assert summaries[0].expected is None and summaries[0].completeness is None
    assert summaries[1].expected == 2
    assert alerts == []


def test_manifest_alone_times_out_from_nominal_readout() -> None:
    # shutter opens at 0, 15 s exposure: nominal readout 15 s, deadline 25 s
    summaries, alerts = run_stream([Step([manifest(1, range(2))], watermark=24), Step(watermark=26)])
    assert brief(summaries) == [(1, 0, "deadline", SummaryStatus.INCOMPLETE, 0, [0, 1])]
    assert len(alerts) == 1


def test_unexpected_detector_does_not_count_and_state_is_collected_after_lateness() -> None:
    config = SummaryConfig(budget=5.0, grace=5.0, allowed_lateness=100.0)
    late: list[tuple[bytes, str]] = []
    summaries, _ = run_stream(
        [
            Step([manifest(1, [0]), arrival(1, 7, 15, 1.0)], watermark=16),
            Step([arrival(1, 0, 15, 1.0)], watermark=20),
            Step([arrival(1, 0, 15, 0.5, run="rerun")], watermark=124),  # within lateness: revises
            Step(watermark=126),  # deadline 25 + lateness 100 passed: state dropped
            # the exposure is remembered as expired: an arrival is late, not a new summary
            Step([arrival(1, 0, 15, 0.1, run="rerun2")], watermark=300),
            # its memory (a night) ends too: an arrival opens new state and, lacking the manifest,
            # is reported as NO_MANIFEST after its own deadline rather than silently lost
            Step(watermark=126 + EXPIRED_MEMORY),
            Step([arrival(1, 0, 15, 0.1, run="rerun3")], watermark=200 + EXPIRED_MEMORY),
        ],
        config,
        late,
    )
    assert brief(summaries) == [
        (1, 0, "all-arrived", SummaryStatus.OK, 1, []),
        (1, 1, "late-arrival", SummaryStatus.OK, 1, []),
        (1, 0, "deadline", SummaryStatus.NO_MANIFEST, 1, []),
    ]
    assert summaries[1].latency_max == pytest.approx(0.5)
    assert [json.loads(body)["detector"] for body, _ in late] == [0]
    assert "after its summary (revision 1) expired" in late[0][1]


def test_manifest_after_the_state_expired_is_late_not_an_incomplete_alert() -> None:
    # Every CCD came and was summarised without a manifest; the manifest comes after the
    # exposure's state expired (deadline 25 + lateness 100): it must not summarise the exposure
    # again from nothing, as INCOMPLETE with nothing arrived, with a budget alert.
    config = SummaryConfig(budget=5.0, grace=5.0, allowed_lateness=100.0)
    late: list[tuple[bytes, str]] = []
    summaries, alerts = run_stream(
        [
            Step([arrival(1, 0, 15, 1.0), arrival(1, 1, 15, 2.0)], watermark=26),
            Step(watermark=200),
            Step([manifest(1, range(2))], watermark=300),
        ],
        config,
        late,
    )
    assert brief(summaries) == [(1, 0, "deadline", SummaryStatus.NO_MANIFEST, 2, [])]
    assert alerts == []
    assert [(ExposureManifest.decode(body), reason) for body, reason in late] == [
        (
            manifest(1, range(2)),
            f"late: ExposureManifest of LSSTComCam exposure {exposure_id(1)} came after its summary "
            "(revision 0) expired at deadline + allowed lateness (100 s): not summarised again",
        )
    ]
