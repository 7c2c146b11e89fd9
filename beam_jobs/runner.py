"""Pipeline options with a local runner chosen when none is named.

For a batch job Beam's DirectRunner first tries Prism, fetching its binary from GitHub at run time:
offline that fails after ~0.3 s and leaves a ``/tmp/beam-temp*`` directory behind on every run,
and an unpinned download has no place in a pipeline (``make prism`` builds a pinned one for
``--runner=PrismRunner``). So each job gets what the DirectRunner falls back to for it: a batch
job the FnApiRunner; a streaming job that reads or writes Pub/Sub the BundleBasedDirectRunner
(the FnApiRunner cannot stream Pub/Sub). Any other streaming job keeps the DirectRunner, which
never tries Prism for one with a cross-language transform (Kafka) and picks the rest by its
transforms.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions


def pipeline_options(
    pipeline_args: Sequence[str] = (), *, streaming: bool = False, pubsub: bool = False
) -> PipelineOptions:
    """``pipeline_args`` as options; ``streaming`` sets streaming mode; no runner named: a local
    one (``pubsub``: the job reads or writes Pub/Sub)."""
    options = PipelineOptions(list(pipeline_args))
    standard = options.view_as(StandardOptions)
    if streaming:
        standard.streaming = True
    if not standard.runner:
        if not standard.streaming:
            standard.runner = "FnApiRunner"
        else:
            standard.runner = "BundleBasedDirectRunner" if pubsub else "DirectRunner"
    return options
