"""WriteSummaryFile: one sorted file, written whole (also when there is nothing to write)."""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import pytest

from beam_jobs.core import content, summarize_exposure
from beam_jobs.runner import pipeline_options
from beam_jobs.sinks import BIGQUERY_SCHEMA, AppendSummariesToLocalFile, WriteSummaryFile, read_summaries
from obsingest.messages import ExposureSummary
from tests.unit.beam_jobs.helpers import INSTRUMENT, arrival, exposure_id, manifest

pytestmark = pytest.mark.unit


def _summaries() -> list[ExposureSummary]:
    out = [
        summarize_exposure(manifest(seq), [arrival(seq, d, 17.0 * seq, 1.0) for d in range(9)])
        for seq in (3, 1, 2)
    ]
    # a later revision of exposure 1 and another instrument sort by (instrument, exposure, rev)
    out.append(summarize_exposure(manifest(1), [], revision=1, trigger="late-arrival"))
    out.append(summarize_exposure(None, [], key=("LATISS", exposure_id(9))))
    return out


def _write(summaries: list[ExposureSummary], path: Path) -> None:
    with beam.Pipeline(options=pipeline_options()) as p:
        _ = p | beam.Create(summaries).with_output_types(ExposureSummary) | WriteSummaryFile(str(path))


@pytest.mark.parametrize("name", ["s.jsonl", "s.avro"])
def test_one_sorted_file_replacing_the_old_one(tmp_path: Path, name: str) -> None:
    path = tmp_path / "out" / name
    path.parent.mkdir()
    path.write_text("stale\n")
    summaries = _summaries()
    _write(summaries, path)

    got = read_summaries(str(path))
    order = [(s.instrument, s.exposure, s.revision) for s in got]
    assert order == [
        ("LATISS", exposure_id(9), 0),
        (INSTRUMENT, exposure_id(1), 0),
        (INSTRUMENT, exposure_id(1), 1),
        (INSTRUMENT, exposure_id(2), 0),
        (INSTRUMENT, exposure_id(3), 0),
    ]
    expected = sorted(summaries, key=lambda s: (s.instrument, s.exposure, s.revision))
    assert [s.to_record() for s in got] == [s.to_record() for s in expected]
    assert [content(s) for s in got] == [content(s) for s in expected]
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temporary left behind
    if name.endswith(".jsonl"):
        lines = path.read_text().splitlines()
        assert len(lines) == 5 and json.loads(lines[1])["exposure"] == exposure_id(1)


def test_no_summaries_still_writes_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    _write([], path)
    assert path.exists() and path.read_text() == ""
    assert read_summaries(str(path)) == []


def test_bigquery_schema_has_a_column_per_summary_field_typed_from_avro() -> None:
    columns = {c["name"]: (c["type"], c["mode"]) for c in BIGQUERY_SCHEMA["fields"]}
    assert set(columns) == set(_summaries()[0].to_json_dict())
    assert columns["instrument"] == ("STRING", "REQUIRED") and columns["exposure"] == ("INTEGER", "REQUIRED")
    assert columns["day_obs"] == ("INTEGER", "NULLABLE") and columns["completeness"] == ("FLOAT", "NULLABLE")
    assert columns["over_budget"] == ("INTEGER", "REPEATED")
    assert columns["first_readout"] == ("TIMESTAMP", "NULLABLE")
    assert columns["emitted_time"] == ("TIMESTAMP", "REQUIRED")


def _append(path: Path, summaries: list[ExposureSummary]) -> None:
    sink = AppendSummariesToLocalFile(str(path))
    sink.start_bundle()
    for s in summaries:
        list(sink.process(s))
    sink.finish_bundle()


@pytest.mark.parametrize("name", ["s.jsonl", "s.avro"])
def test_a_summary_torn_by_a_killed_streaming_job_costs_only_itself(tmp_path: Path, name: str) -> None:
    """The streaming job killed mid-append leaves a line without its end, or an Avro block cut
    short. The next run appended after it, and every read of the file (``obsingest report``)
    failed: JSONDecodeError, or zlib's "invalid distance". The torn summary's bundle was not
    committed: it is emitted again."""
    first, torn, later = _summaries()[:3]
    path = tmp_path / name
    _append(path, [first])
    before = path.stat().st_size
    _append(path, [torn])
    with path.open("r+b") as out:  # killed halfway through writing it
        out.truncate((before + path.stat().st_size) // 2)
    assert [content(s) for s in read_summaries(str(path))] == [content(first)]
    _append(path, [torn, later])
    assert [content(s) for s in read_summaries(str(path))] == [content(s) for s in (first, torn, later)]
