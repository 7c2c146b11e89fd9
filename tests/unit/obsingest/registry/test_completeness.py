"""The presence rules without a database: percentiles as numpy (and Beam) compute them, the
status precedence, expected from the manifest or else the instrument."""

import numpy as np
import pytest

from obsingest.registry.completeness import (
    COMPLETE,
    FROM_INSTRUMENT,
    FROM_MANIFEST,
    INCOMPLETE,
    OVER_BUDGET,
    percentile,
    status_of,
    summarize,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "values",
    [[3.0], [1.0, 2.0], [0.0, 10.0], [4.0, 1.0, 3.0, 2.0], [5.2, 0.1, 3.3, 2.2, 9.9], list(range(205))],
)
@pytest.mark.parametrize("q", [0, 50, 95, 99, 100])
def test_percentile_is_numpys_linear_interpolation(values, q):
    floats = [float(v) for v in values]  # in any order
    assert percentile(floats, q) == pytest.approx(float(np.percentile(floats, q)))


def test_percentile_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_status_precedence_is_incomplete_then_over_budget_then_complete():
    assert status_of([1], [2]) == INCOMPLETE
    assert status_of([], [2]) == OVER_BUDGET
    assert status_of([], []) == COMPLETE


def test_summary_against_a_manifest_counts_missing_unexpected_and_late():
    registered = [(0, 1.0), (1, 6.5), (2, None), (7, 2.0)]  # 7 is not in the manifest
    s = summarize("LSSTComCam", 1, 2, [0, 1, 2, 3], FROM_MANIFEST, registered, 5.0)
    assert (s.expected, s.registered, s.missing, s.unexpected) == (4, 4, (3,), (7,))
    assert s.over_budget == (1,) and s.latency_unknown == 1
    assert s.latency_max == 6.5 and s.latency_p50 == pytest.approx(np.percentile([1, 2, 6.5], 50))
    assert s.status == INCOMPLETE and not s.made_budget and s.note == ""


def test_without_a_manifest_the_answer_says_what_it_expected():
    s = summarize("LATISS", 1, 2, [0], FROM_INSTRUMENT, [(0, 1.0)], 5.0)
    assert s.status == COMPLETE and s.made_budget
    assert s.note == "no manifest recorded for this exposure: expected is every detector of LATISS (1)"


def test_nothing_registered_has_no_latency():
    s = summarize("LATISS", 1, 2, [0], FROM_MANIFEST, [], 5.0)
    assert s.status == INCOMPLETE and s.missing == (0,)
    assert (s.latency_p50, s.latency_p95, s.latency_max) == (None, None, None)
