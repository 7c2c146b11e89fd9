"""Batch mode: summaries of a night from archived ArrivalEvent and ExposureManifest Avro files,
written as JSON lines (Avro when the output ends in ``.avro``). The DirectRunner runs in-memory:
multi_threading lost events on Beam 2.77.
"""

from __future__ import annotations

import logging
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.runner import pipeline_options
from beam_jobs.sinks import WriteDeadLetterFile, WriteSummaryFile, read_summaries
from beam_jobs.sources import ReadExposureEvents
from beam_jobs.transforms import ALERTS, BAD, SUMMARIES, ExposureSummaries, SummaryConfig
from obsingest import defaults
from obsingest.logs import get_logger, log_event
from obsingest.messages import ExposureSummary

log = get_logger("beam_jobs.summarize")


def dead_letter_path(output: str, given: str | None = None) -> str:
    """Where the batch job writes its dead letters: ``given``, else ``OUTPUT.dead-letter.jsonl``."""
    return given or f"{output}.dead-letter.jsonl"


def run_batch(
    arrivals: list[str],
    manifests: list[str],
    output: str,
    budget: float = defaults.BUDGET_SECONDS,
    pipeline_args: list[str] | None = None,
    alerts_output: str | None = None,
    dead_letter_output: str | None = None,
) -> list[ExposureSummary]:
    """Run the batch job; write ``output`` and return its summaries sorted by (instrument,
    exposure). A bad input file, block or record is skipped, its file and reason written as a
    JSON line to ``dead_letter_output`` (default ``OUTPUT.dead-letter.jsonl``; empty: nothing
    was bad)."""
    started = time.monotonic()
    dead_letter_output = dead_letter_path(output, dead_letter_output)
    with beam.Pipeline(options=pipeline_options(pipeline_args or [])) as p:
        events = p | "ReadEvents" >> ReadExposureEvents([*arrivals, *manifests])
        result = events | "ExposureSummaries" >> ExposureSummaries(
            SummaryConfig(budget=budget), streaming=False
        )
        _ = result[SUMMARIES] | "WriteSummaries" >> WriteSummaryFile(output)
        if alerts_output:
            _ = result[ALERTS] | "WriteAlerts" >> WriteSummaryFile(alerts_output)
        _ = result[BAD] | "WriteDeadLetters" >> WriteDeadLetterFile(dead_letter_output)
    summaries = sorted(read_summaries(output), key=lambda s: (s.instrument, s.exposure))
    with FileSystems.open(dead_letter_output) as fh:
        dead = fh.read().decode("utf-8").splitlines()
    if dead:
        log_event(log, "batch_dead_letters", logging.WARNING, path=dead_letter_output, bad_inputs=len(dead))
    seconds = round(time.monotonic() - started, 3)
    log_event(log, "batch_done", logging.INFO, output=output, exposures=len(summaries), seconds=seconds)
    return summaries
