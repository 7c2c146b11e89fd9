"""Builders for hand-made manifests and arrivals, and a TestStream runner for the streaming path."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.utils.timestamp import Timestamp

from beam_jobs.core import Arrival, to_micros
from beam_jobs.transforms import ALERTS, LATE, SUMMARIES, ExposureSummaries, SummaryConfig, with_event_time
from obsingest.dataid import DataId, dataset_id
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary

T0 = datetime(2025, 1, 1, 3, 0, 0, tzinfo=UTC)
DAY = 20250101
INSTRUMENT = "LSSTComCam"


def exposure_id(seq: int) -> int:
    return DAY * 100_000 + seq


def manifest(
    seq: int,
    detectors: Sequence[int] = range(9),
    start: float = 0.0,
    exptime: float = 15.0,
    instrument: str = INSTRUMENT,
) -> ExposureManifest:
    """Exposure ``seq``; shutter opens at T0 + start, so nominal readout is start + exptime."""
    opened = T0 + timedelta(seconds=start)
    return ExposureManifest(
        instrument,
        exposure_id(seq),
        DAY,
        list(detectors),
        opened,
        exptime,
        "r",
        opened - timedelta(seconds=1),
    )


def arrival(
    seq: int, detector: int, readout: float, latency: float, run: str = "run1", instrument: str = INSTRUMENT
) -> ArrivalEvent:
    """CCD ``detector`` of exposure ``seq`` read out at T0 + readout, published latency s later."""
    data_id = DataId(instrument, exposure_id(seq), detector)
    ro = T0 + timedelta(seconds=readout)
    pub = ro + timedelta(seconds=latency)
    return ArrivalEvent(
        dataset_id(data_id, run=run),
        "raw",
        run,
        instrument,
        exposure_id(seq),
        detector,
        DAY,
        f"file:///store/{data_id.key}",
        1,
        "crc32c:00000000",
        "direct",
        ro,
        pub - timedelta(seconds=0.1),
        pub,
        ro,
        ro,
    )


def at(seconds: float) -> Timestamp:
    return Timestamp(micros=to_micros(T0 + timedelta(seconds=seconds)))


@dataclass
class Step:
    """One TestStream step: elements to add, or a watermark to advance to (seconds after T0)."""

    elements: Sequence[ExposureManifest | ArrivalEvent] = ()
    watermark: float | None = None


_LOCK = threading.Lock()
_SINKS: dict[str, list] = {}


class _Collect(beam.DoFn):
    def __init__(self, name: str) -> None:
        self.name = name

    def process(self, item: Any) -> None:
        with _LOCK:
            _SINKS[self.name].append(item)


def run_stream(
    steps: Sequence[Step], config: SummaryConfig | None = None, late: list[tuple[bytes, str]] | None = None
) -> tuple[list[ExposureSummary], list[ExposureSummary]]:
    """Run the streaming ExposureSummaries over a TestStream; returns (summaries, alerts) in
    emission order, and appends the ``late`` output's (body, reason) pairs to ``late``."""
    config = config or SummaryConfig(budget=5.0, grace=5.0, allowed_lateness=600.0)
    stream = TestStream()
    for step in steps:
        if step.elements:
            stream.add_elements(
                [
                    with_event_time(e if isinstance(e, ExposureManifest) else Arrival.from_event(e))
                    for e in step.elements
                ]
            )
        if step.watermark is not None:
            stream.advance_watermark_to(at(step.watermark))
    stream.advance_watermark_to_infinity()
    name = f"run{id(steps)}-{len(_SINKS)}"
    with _LOCK:
        _SINKS[name + "s"] = []
        _SINKS[name + "a"] = []
        _SINKS[name + "l"] = []
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(options=options) as p:
        events = p | stream
        inputs = {
            "manifests": events | "M" >> beam.Filter(lambda e: isinstance(e, ExposureManifest)),
            "arrivals": events | "A" >> beam.Filter(lambda e: isinstance(e, Arrival)),
        }
        out = inputs | ExposureSummaries(config, streaming=True)
        _ = out[SUMMARIES] | "S" >> beam.ParDo(_Collect(name + "s"))
        _ = out[ALERTS] | "L" >> beam.ParDo(_Collect(name + "a"))
        _ = out[LATE] | "D" >> beam.ParDo(_Collect(name + "l"))
    with _LOCK:
        (late if late is not None else []).extend(_SINKS.pop(name + "l"))
        return _SINKS.pop(name + "s"), _SINKS.pop(name + "a")
