"""The runner a job gets when none is named: local, and for batch never a run-time download of Prism."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.testing.util import assert_that, equal_to

from beam_jobs.runner import pipeline_options

pytestmark = pytest.mark.unit


def runner_of(options: beam.options.pipeline_options.PipelineOptions) -> str:
    return str(options.view_as(StandardOptions).runner)


def test_batch_runs_on_the_fn_api_runner_and_streaming_on_the_direct_runner() -> None:
    assert runner_of(pipeline_options()) == "FnApiRunner"
    assert runner_of(pipeline_options(pubsub=True)) == "FnApiRunner"
    assert runner_of(pipeline_options(["--streaming"])) == "DirectRunner"
    streaming = pipeline_options([], streaming=True)
    assert runner_of(streaming) == "DirectRunner"
    assert streaming.view_as(StandardOptions).streaming


def test_streaming_pubsub_runs_on_what_the_direct_runner_falls_back_to() -> None:
    """Without Prism the DirectRunner ends on the BundleBasedDirectRunner for Pub/Sub I/O."""
    assert runner_of(pipeline_options(streaming=True, pubsub=True)) == "BundleBasedDirectRunner"
    assert runner_of(pipeline_options(["--streaming"], pubsub=True)) == "BundleBasedDirectRunner"


def test_a_named_runner_is_kept() -> None:
    options = pipeline_options(["--runner=PrismRunner", "--prism_location=/x/prism"], streaming=True)
    assert runner_of(options) == "PrismRunner"


def test_a_default_batch_pipeline_never_tries_prism(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beam's DirectRunner would try Prism first (and swallow its failure): fail if it is tried."""
    tried: list[str] = []

    def refuse(self: object, *args: object) -> None:
        tried.append("prism")
        raise RuntimeError("Prism tried")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    with beam.Pipeline(options=pipeline_options()) as p:
        assert_that(p | beam.Create([1, 2]) | beam.Map(lambda x: x * 10), equal_to([10, 20]))
    assert tried == []
