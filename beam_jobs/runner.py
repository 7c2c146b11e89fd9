"""Pipeline options with a local runner chosen when none is named.

For a batch job Beam's DirectRunner first tries Prism, fetching its binary from GitHub at run time:
offline that fails after ~0.3 s and leaves a ``/tmp/beam-temp*`` directory behind on every run,
and an unpinned download has no place in a pipeline (``make prism`` builds a pinned one for
``--runner=PrismRunner``). The batch job gets what the DirectRunner falls back to for it, the
FnApiRunner. A streaming job keeps the DirectRunner: which runner suits it depends on its sources
and sinks (Pub/Sub or Kafka), and that choice is the DirectRunner's.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions


def pipeline_options(pipeline_args: Sequence[str] = (), *, streaming: bool = False) -> PipelineOptions:
    """``pipeline_args`` as options; ``streaming`` sets streaming mode; no runner named: a local one."""
    options = PipelineOptions(list(pipeline_args))
    standard = options.view_as(StandardOptions)
    if streaming:
        standard.streaming = True
    if not standard.runner:
        standard.runner = "DirectRunner" if standard.streaming else "FnApiRunner"
    return options
