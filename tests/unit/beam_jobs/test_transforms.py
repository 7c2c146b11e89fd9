"""The batch fold: any split into bundles and any merge order give the summary of all events;
the keyed and the dict input of ExposureSummaries give the same batch summaries."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from datetime import timedelta
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.pvalue import TaggedOutput
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_jobs.core import Arrival, content, summarize_exposure
from beam_jobs.runner import pipeline_options
from beam_jobs.transforms import (
    ARRIVAL,
    BAD,
    MANIFEST,
    SUMMARIES,
    DecodeMessages,
    ExposureSummaries,
    FoldExposure,
    SummaryConfig,
    key_arrival,
    key_manifest,
)
from obsingest.messages import ArrivalEvent, ExposureManifest
from tests.unit.beam_jobs.helpers import T0, arrival, exposure_id, manifest

pytestmark = pytest.mark.unit


def _exposure(rng: random.Random) -> tuple[ExposureManifest, list[ArrivalEvent]]:
    """One exposure with duplicates, reruns, ties in publication time and a late manifest."""
    events = []
    for _ in range(rng.randint(1, 30)):
        latency = rng.choice([1.0, 2.0, 6.0, round(rng.uniform(0, 8), 3)])
        run = rng.choice(["run1", "run2", "run3"])
        events.append(arrival(1, rng.randrange(9), 15.0 + rng.choice([0, 0.01]), latency, run))
    return manifest(1, rng.sample(range(9), rng.randint(0, 8))), events


def _fold(elements: list, rng: random.Random) -> list:
    fn = FoldExposure()
    bundles: list[list] = [fn.create_accumulator() for _ in range(rng.randint(1, 4))]
    for element in elements:
        fn.add_input(rng.choice(bundles), element)
    rng.shuffle(bundles)
    others = copy.deepcopy(bundles[1:])
    merged = fn.extract_output(fn.merge_accumulators(bundles))
    assert bundles[1:] == others  # only the first accumulator may be changed by a merge
    return merged


def test_fold_in_any_bundles_and_order_summarizes_like_all_events() -> None:
    rng = random.Random(11)
    for _ in range(300):
        first, events = _exposure(rng)
        late = manifest(1, first.detectors, start=rng.choice([-2.0, 0.0, 2.0]))
        elements: list[tuple[str, Any]] = [(ARRIVAL, tuple(Arrival.from_event(e))) for e in events]
        elements += [(MANIFEST, first), (MANIFEST, late)]
        rng.shuffle(elements)
        held, best = _fold(elements, rng)
        earliest = min((first, late), key=lambda m: m.published)
        assert held.published == earliest.published
        folded = summarize_exposure(held, [Arrival(*a) for a in best.values()])
        assert content(folded) == content(summarize_exposure(earliest, events))


def _line(summary) -> str:
    return json.dumps(content(summary), default=str, sort_keys=True)


def test_keyed_and_dict_inputs_give_the_same_batch_summaries() -> None:
    rng = random.Random(5)
    manifests = [manifest(seq, range(9), start=17.0 * seq) for seq in (1, 2)]
    events = [
        arrival(seq, d, 17.0 * seq + 15, rng.uniform(0.5, 7), rng.choice(["run1", "run2"]))
        for seq in (1, 2, 3)
        for d in range(9)
        if rng.random() < 0.9
    ]
    arrivals = [Arrival.from_event(e) for e in events]
    expected = [
        _line(summarize_exposure(m, [e for e in events if e.exposure == m.exposure])) for m in manifests
    ] + [_line(summarize_exposure(None, [e for e in events if e.exposure == arrivals[-1][2]]))]

    config = SummaryConfig()
    with beam.Pipeline(options=pipeline_options()) as p:
        as_dict = {
            "manifests": p | "M" >> beam.Create(manifests),
            "arrivals": p | "A" >> beam.Create(arrivals),
        } | "Dict" >> ExposureSummaries(config, streaming=False)
        keyed = (
            p
            | "K" >> beam.Create([key_manifest(m) for m in manifests] + [key_arrival(a) for a in arrivals])
            | "Keyed" >> ExposureSummaries(config, streaming=False)
        )
        assert_that(as_dict[SUMMARIES] | "L1" >> beam.Map(_line), equal_to(expected), "dict")
        assert_that(keyed[SUMMARIES] | "L2" >> beam.Map(_line), equal_to(expected), "keyed")


@pytest.mark.parametrize("exposure_time", [float("nan"), float("inf"), 1e15, -1e15])
def test_a_manifest_without_a_plausible_exposure_time_is_dead_lettered_not_held(exposure_time: float) -> None:
    """It decodes (Avro's double takes NaN), but its deadline is no timestamp: held in the
    streaming state it raised (ValueError, OverflowError) in ExposureStateFn at every delivery,
    failing the bundle: the DirectRunner gave up, Pub/Sub redelivered it forever, and the
    exposures behind it in the bundle were never summarized."""
    body = manifest(1, range(2), exptime=exposure_time).encode()
    out = list(DecodeMessages(ExposureManifest.SCHEMA).process(body))
    assert len(out) == 1 and isinstance(out[0], TaggedOutput) and out[0].tag == BAD
    kept, reason = out[0].value
    assert kept == body
    assert "exposure_time" in reason and str(exposure_id(1)) in reason
    good = list(DecodeMessages(ExposureManifest.SCHEMA).process(manifest(1, range(2)).encode()))
    assert [type(e) for e in good] == [TimestampedValue]


YEARS = 10 * 365 * 86_400.0


@pytest.mark.parametrize("contract", [ArrivalEvent.SCHEMA, ExposureManifest.SCHEMA])
def test_an_event_time_far_after_its_publication_is_dead_lettered_not_held(contract: str) -> None:
    """A readout (a shutter opening) years after its own publication decoded, and its deadline
    (event time + budget + grace) held its exposure's streaming state, unsummarised, until then:
    one more key kept for every such message, and its CCDs never reported."""
    far: ArrivalEvent | ExposureManifest
    near: ArrivalEvent | ExposureManifest
    if contract == ArrivalEvent.SCHEMA:
        far, near = arrival(1, 0, YEARS, -YEARS + 1.0), arrival(1, 0, 15.0, -60.0)  # clock skew
        field = "readout_time"
    else:
        far = dataclasses.replace(manifest(1), published=T0 - timedelta(seconds=YEARS))
        near = dataclasses.replace(manifest(1), published=T0 - timedelta(seconds=60))
        field = "obs_start"
    out = list(DecodeMessages(contract).process(far.encode()))
    assert len(out) == 1 and isinstance(out[0], TaggedOutput) and out[0].tag == BAD
    kept, reason = out[0].value
    assert kept == far.encode()
    assert (
        f"exposure {exposure_id(1)}: {field}" in reason
        and "more than 86400 s after its publication" in reason
    )
    assert [type(e) for e in DecodeMessages(contract).process(near.encode())] == [TimestampedValue]
