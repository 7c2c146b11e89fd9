"""Beam batch throughput on the batch job's default runner, next to a plain GroupByKey-and-percentiles
pipeline on the same Avro files (alternated repeats, medians), and the streaming lag from an exposure's last
arrival to its summary, measured in-process with TestStream (not over Pub/Sub).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream

from beam_jobs.core import Arrival
from beam_jobs.runner import pipeline_options
from beam_jobs.summarize import run_batch
from beam_jobs.transforms import SUMMARIES, ExposureSummaries, SummaryConfig, with_event_time
from benchmarks.common import cli, save_result
from obsingest import avro
from obsingest.dataid import DataId, dataset_id
from obsingest.messages import ExposureManifest

EXPOSURES = 1_059
DETECTORS = 189
REPEATS = 5
LAG_EXPOSURES = 60
T0 = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)
DAY = 20250601


def _events(exposures: int) -> tuple[list[ExposureManifest], list[dict[str, Any]]]:
    rng = np.random.default_rng(42)
    manifests, records = [], []
    for seq in range(1, exposures + 1):
        exposure = DAY * 100_000 + seq
        start = T0 + timedelta(seconds=17 * seq)
        manifests.append(
            ExposureManifest("LSSTCam", exposure, DAY, list(range(DETECTORS)), start, 15.0, "r", start)
        )
        readout = start + timedelta(seconds=15)
        latencies = rng.gamma(6.0, 0.3, DETECTORS)
        for det in range(DETECTORS):
            published = readout + timedelta(seconds=float(latencies[det]))
            records.append(
                {
                    "dataset_id": str(dataset_id(DataId("LSSTCam", exposure, det))),
                    "dataset_type": "raw",
                    "run": "bench",
                    "instrument": "LSSTCam",
                    "exposure": exposure,
                    "detector": det,
                    "day_obs": DAY,
                    "uri": f"file:///bench/{exposure}/{det}",
                    "size": 15_137_280,
                    "checksum": "crc32c:00000000",
                    "transport": "direct",
                    "readout_time": readout,
                    "compressed_time": None,
                    "stored_time": None,
                    "registered_time": published,
                    "published_time": published,
                }
            )
    return manifests, records


def _write_inputs(workdir: Path) -> tuple[list[str], list[str], int]:
    manifests, records = _events(EXPOSURES)
    avro.write_container(workdir / "manifests.avro", "ExposureManifest", [m.to_record() for m in manifests])
    shards = 4
    for i in range(shards):
        avro.write_container(workdir / f"arrivals-{i}.avro", "ArrivalEvent", records[i::shards])
    return [str(workdir / "arrivals-*.avro")], [str(workdir / "manifests.avro")], len(records)


def _percentiles(item: tuple[tuple[str, int], list[float]]) -> str:
    key, values = item
    arr = np.asarray(values)
    p50, p95 = np.percentile(arr, [50, 95])
    return json.dumps([*key, len(arr), float(p50), float(p95), float(arr.max())])


def _plain(arrivals: list[str], output: str) -> None:
    """The reference: read, key by exposure, GroupByKey, percentiles, write (no dedup, manifests
    or status)."""
    with beam.Pipeline(options=pipeline_options()) as p:
        _ = (
            p
            | beam.io.ReadFromAvro(arrivals[0])
            | beam.Map(
                lambda r: (
                    (r["instrument"], r["exposure"]),
                    (r["published_time"] - r["readout_time"]).total_seconds(),
                )
            )
            | beam.GroupByKey()
            | beam.Map(_percentiles)
            | beam.io.WriteToText(output, num_shards=1, shard_name_template="")
        )


def _timed(fn: Any) -> tuple[float, float]:
    """(wall, CPU seconds of this process): the DirectRunner runs in-process; CPU is steadier."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


_SEEN: dict[int, float] = {}
_EMITTED: dict[int, float] = {}
_LOCK = threading.Lock()


class _Stamp(beam.DoFn):
    def __init__(self, into: str) -> None:
        self.into = into

    def process(self, element: Any) -> Any:
        now = time.perf_counter()
        with _LOCK:
            if self.into == "seen" and isinstance(element, Arrival):
                _SEEN[element.exposure] = now
            elif self.into == "emitted":
                _EMITTED.setdefault(element.exposure, now)
        yield element


def streaming_lag(exposures: int = LAG_EXPOSURES) -> dict[str, Any]:
    """Wall-clock lag, last arrival into the stateful step -> its summary out (all-arrived)."""
    manifests, records = _events(exposures)
    stream = TestStream()
    by_exposure: dict[int, list[Arrival]] = {}
    for r in records:
        by_exposure.setdefault(r["exposure"], []).append(Arrival.from_record(r))
    for m in manifests:
        stream.add_elements([with_event_time(m)])
        stream.add_elements([with_event_time(a) for a in by_exposure[m.exposure]])
        stream.advance_watermark_to(with_event_time(m).timestamp + 15)
    stream.advance_watermark_to_infinity()
    _SEEN.clear()
    _EMITTED.clear()
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(options=options) as p:
        events = p | stream | "Seen" >> beam.ParDo(_Stamp("seen"))
        out = {
            "manifests": events | "M" >> beam.Filter(lambda e: isinstance(e, ExposureManifest)),
            "arrivals": events | "A" >> beam.Filter(lambda e: isinstance(e, Arrival)),
        } | ExposureSummaries(SummaryConfig(), streaming=True)
        _ = out[SUMMARIES] | "Emitted" >> beam.ParDo(_Stamp("emitted"))
    lags = [(_EMITTED[e] - _SEEN[e]) * 1000 for e in _EMITTED if e in _SEEN]
    return {
        "method": "in-process TestStream on the DirectRunner (no Pub/Sub)",
        "exposures": len(lags),
        "lag_ms_p50": round(float(np.percentile(lags, 50)), 1),
        "lag_ms_max": round(float(max(lags)), 1),
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="beam-bench-") as tmp:
        workdir = Path(tmp)
        started = time.perf_counter()
        arrivals, manifests, events = _write_inputs(workdir)
        write_s = time.perf_counter() - started
        ours: list[tuple[float, float]] = []
        plain: list[tuple[float, float]] = []
        jobs = [
            (ours, lambda: run_batch(arrivals, manifests, str(workdir / "s.jsonl"))),
            (plain, lambda: _plain(arrivals, str(workdir / "plain.jsonl"))),
        ]
        for repeat in range(REPEATS):  # alternated, so drifting load hits both alike
            for into, job in jobs if repeat % 2 == 0 else jobs[::-1]:
                into.append(_timed(job))
    lag = streaming_lag()
    (ours_s, ours_cpu), (plain_s, plain_cpu) = (
        [statistics.median(c) for c in zip(*r, strict=True)] for r in (ours, plain)
    )
    result = {
        "benchmark": "beam_batch",
        "runner": "FnApiRunner (the batch job's default, as the DirectRunner falls back to)",
        "events": events,
        "exposures": EXPOSURES,
        "detectors": DETECTORS,
        "repeats": REPEATS,
        "write_inputs_s": round(write_s, 2),
        "summarize_s_median": round(ours_s, 2),
        "summarize_events_per_s": round(events / ours_s),
        "summarize_cpu_s_median": round(ours_cpu, 2),
        "plain_gbk_s_median": round(plain_s, 2),
        "plain_gbk_events_per_s": round(events / plain_s),
        "plain_gbk_cpu_s_median": round(plain_cpu, 2),
        "ratio_events_per_s": round(plain_s / ours_s, 2),
        "ratio_cpu": round(plain_cpu / ours_cpu, 2),
        "ratio_per_repeat": [round(p[0] / o[0], 2) for o, p in zip(ours, plain, strict=True)],
        "summarize_s": [round(o[0], 2) for o in ours],
        "summarize_cpu_s": [round(o[1], 2) for o in ours],
        "plain_gbk_s": [round(p[0], 2) for p in plain],
        "plain_gbk_cpu_s": [round(p[1], 2) for p in plain],
        "reference_plain_gbk_events_per_s": 40_000,
        "streaming_lag": lag,
    }
    save_result("beam", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    ours, plain = result["summarize_events_per_s"], result["plain_gbk_events_per_s"]
    per_repeat = ", ".join(f"{r:.2f}x" for r in result["ratio_per_repeat"])
    lag = result["streaming_lag"]
    return "\n".join(
        [
            f"{result['events']:,} ArrivalEvents ({result['exposures']} exposures x "
            f"{result['detectors']} CCDs), {result['runner']}, median of {result['repeats']} "
            "alternated repeats; ratios are of medians from the same run.",
            "",
            "| pipeline | seconds | CPU seconds | events/s | vs plain GroupByKey |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| ours (summaries) | {result['summarize_s_median']} | "
            f"{result['summarize_cpu_s_median']} | {ours:,} | "
            f"{result['ratio_events_per_s']:.2f}x (CPU {result['ratio_cpu']:.2f}x) |",
            f"| plain GroupByKey + percentiles | {result['plain_gbk_s_median']} | "
            f"{result['plain_gbk_cpu_s_median']} | {plain:,} | 1.00x |",
            "",
            f"Ratio per repeat: {per_repeat}. Reference figure: "
            f"{result['reference_plain_gbk_events_per_s']:,} events/s. "
            f"Streaming lag, last arrival -> summary: p50 {lag['lag_ms_p50']} ms, max "
            f"{lag['lag_ms_max']} ms ({lag['method']}).",
        ]
    )


if __name__ == "__main__":
    # Run through the importable module: DoFns defined in __main__ are pickled by value, and the
    # lag stamps would land in copies of the module's dicts.
    from benchmarks import beam_batch

    sys.exit(cli(beam_batch.run))
