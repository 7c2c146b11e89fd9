"""Pure summary rules with hand-computed answers (no Beam)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from beam_jobs.core import Arrival, dedupe, is_breach, same_content, summarize_exposure
from obsingest.messages import SummaryStatus
from tests.unit.beam_jobs.helpers import T0, arrival, exposure_id, manifest

pytestmark = pytest.mark.unit


def test_percentiles_use_linear_interpolation() -> None:
    # latencies 1, 2, 3, 4: p50 = 2.5; p95 at rank 0.95 * 3 = 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    arrivals = [arrival(1, d, 15.0, lat) for d, lat in enumerate([4.0, 1.0, 3.0, 2.0])]
    s = summarize_exposure(manifest(1, range(4)), arrivals, budget=5.0)
    assert (s.latency_p50, s.latency_p95, s.latency_max) == pytest.approx((2.5, 3.85, 4.0))
    assert (s.expected, s.arrived, s.completeness) == (4, 4, 1.0)
    assert s.status == SummaryStatus.OK and s.over_budget == [] and s.missing_detectors == []
    assert s.first_readout is not None and s.last_arrival is not None
    assert s.first_readout.timestamp() == pytest.approx(T0.timestamp() + 15.0)
    assert s.last_arrival.timestamp() == pytest.approx(T0.timestamp() + 19.0)
    assert (s.revision, s.trigger, s.day_obs) == (0, "batch", 20250101)


def test_budget_is_strict_and_over_budget_lists_detectors() -> None:
    arrivals = [arrival(1, 0, 15, 5.0), arrival(1, 1, 15, 5.000001), arrival(1, 2, 15, 7.0)]
    s = summarize_exposure(manifest(1, range(3)), arrivals, budget=5.0)
    assert s.over_budget == [1, 2]
    assert s.status == SummaryStatus.OVER_BUDGET
    assert is_breach(s)


def test_incomplete_wins_over_over_budget() -> None:
    s = summarize_exposure(manifest(1, range(3)), [arrival(1, 0, 15, 9.0)], budget=5.0)
    assert s.status == SummaryStatus.INCOMPLETE
    assert s.missing_detectors == [1, 2]
    assert s.completeness == pytest.approx(1 / 3)
    assert s.over_budget == [0]


def test_duplicates_count_once_keeping_earliest_publication() -> None:
    first = arrival(1, 0, 15, 2.0)
    again = arrival(1, 0, 15, 6.0)  # same dataset id, published later (redelivery)
    assert first.dataset_id == again.dataset_id
    other_run = arrival(1, 0, 15, 1.5, run="run2")  # same detector, another dataset id
    s = summarize_exposure(manifest(1, [0]), [again, first, other_run, again], budget=5.0)
    assert s.arrived == 1
    assert s.latency_max == pytest.approx(1.5)
    assert s.status == SummaryStatus.OK
    assert dedupe([again, first, other_run, again], [0]) == {0: Arrival.from_event(other_run)}


def test_detectors_outside_the_manifest_are_not_counted() -> None:
    arrivals = [arrival(1, 0, 15, 1.0), arrival(1, 1, 15, 1.0), arrival(1, 8, 15, 30.0)]
    s = summarize_exposure(manifest(1, [0, 1]), arrivals, budget=5.0)
    assert (s.expected, s.arrived, s.completeness) == (2, 2, 1.0)
    assert s.over_budget == [] and s.latency_max == pytest.approx(1.0)
    assert s.status == SummaryStatus.OK
    assert list(dedupe(arrivals, [0, 1])) == [0, 1] and list(dedupe(arrivals, None)) == [0, 1, 8]


def test_no_manifest() -> None:
    s = summarize_exposure(None, [arrival(2, 3, 30, 6.0), arrival(2, 4, 30, 1.0)], budget=5.0)
    assert (s.instrument, s.exposure, s.day_obs) == ("LSSTComCam", exposure_id(2), 20250101)
    assert (s.expected, s.completeness, s.arrived) == (None, None, 2)
    assert s.missing_detectors == [] and s.over_budget == [3]
    assert s.status == SummaryStatus.NO_MANIFEST
    assert not is_breach(s)


def test_manifest_without_arrivals() -> None:
    s = summarize_exposure(manifest(1, range(3)), [], budget=5.0)
    assert (s.arrived, s.completeness, s.latency_p50, s.latency_max) == (0, 0.0, None, None)
    assert s.missing_detectors == [0, 1, 2] and s.status == SummaryStatus.INCOMPLETE
    assert s.first_readout is None and s.last_arrival is None


def test_needs_something_to_name_the_exposure() -> None:
    with pytest.raises(ValueError):
        summarize_exposure(None, [], budget=5.0)
    s = summarize_exposure(None, [], budget=5.0, key=("LSSTCam", exposure_id(7)))
    assert (s.instrument, s.arrived, s.status) == ("LSSTCam", 0, SummaryStatus.NO_MANIFEST)


def test_arrival_record_round_trip_and_content_comparison() -> None:
    event = arrival(1, 0, 15, 2.25)
    compact = Arrival.from_event(event)
    assert compact == Arrival.from_record(event.to_record())
    assert compact.latency == pytest.approx(2.25)
    a = summarize_exposure(manifest(1, [0]), [event], trigger="batch", revision=0)
    b = summarize_exposure(manifest(1, [0]), [compact], trigger="deadline", revision=3)
    assert same_content(a, b)


def _dedupe_by_the_rule(arrivals: list[Arrival], expected: list[int] | None) -> dict[int, Arrival]:
    """The rule spelled out, slowly: per dataset id the earliest (published, readout); then per
    detector the earliest publication, ties by dataset id."""
    by_dataset: dict[str, Arrival] = {}
    for a in arrivals:
        seen = by_dataset.get(a.dataset_id)
        if seen is None or (a.published_us, a.readout_us) < (seen.published_us, seen.readout_us):
            by_dataset[a.dataset_id] = a
    by_detector: dict[int, Arrival] = {}
    for a in sorted(by_dataset.values(), key=lambda a: (a.published_us, a.dataset_id)):
        by_detector.setdefault(a.detector, a)
    return {d: a for d, a in by_detector.items() if expected is None or d in expected}


def test_dedupe_and_percentiles_match_the_rule_on_random_exposures() -> None:
    rng = random.Random(2)
    for _ in range(500):
        events = [
            arrival(
                1,
                rng.randrange(9),
                15.0 + rng.choice([0.0, 0.01]),
                rng.choice([1.0, 2.0, 6.0, round(rng.uniform(0, 8), 4)]),
                run=rng.choice(["run1", "run2", "run3"]),
            )
            for _ in range(rng.randint(1, 25))
        ]
        arrivals = [Arrival.from_event(e) for e in events]
        expected = sorted(rng.sample(range(9), rng.randint(0, 9))) if rng.random() < 0.8 else None
        got = dedupe(events, expected)
        assert got == _dedupe_by_the_rule(arrivals, expected)
        m = manifest(1, expected) if expected is not None else None
        s = summarize_exposure(m, arrivals)
        values = [a.latency for a in got.values()]
        if values:
            assert (s.latency_p50, s.latency_p95, s.latency_max) == (
                float(np.percentile(values, 50)),
                float(np.percentile(values, 95)),
                max(values),
            )
            assert s.over_budget == sorted(d for d, a in got.items() if a.latency > 5.0)
        else:
            assert s.latency_p50 is None and s.over_budget == []
