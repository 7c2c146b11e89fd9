"""Where ExposureSummaries go: files, Pub/Sub (single-object-encoded Avro), BigQuery. A file is
JSON lines of ``ExposureSummary.to_json_dict()`` (ISO timestamps), or an Avro object container
file when its name ends in ``.avro``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import fastavro
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

import schemas
from obsingest import avro
from obsingest.logs import get_logger, log_event
from obsingest.messages import ExposureSummary

log = get_logger("beam_jobs.sinks")

#: Avro type -> BigQuery column type (nullable unions are NULLABLE, arrays REPEATED)
_BIGQUERY_TYPES = {"string": "STRING", "int": "INTEGER", "long": "INTEGER", "double": "FLOAT"}


def _bigquery_column(field: dict[str, Any]) -> dict[str, str]:
    kind, mode = field["type"], "REQUIRED"
    if isinstance(kind, list):
        kind, mode = next(t for t in kind if t != "null"), "NULLABLE"
    if isinstance(kind, dict) and kind["type"] == "array":
        kind, mode = kind["items"], "REPEATED"
    if isinstance(kind, dict):
        kind = "TIMESTAMP" if kind.get("logicalType") == "timestamp-micros" else kind["type"]
    return {"name": field["name"], "type": _BIGQUERY_TYPES.get(kind, kind), "mode": mode}


#: BigQuery table schema for ExposureSummary, from its Avro schema (documented, not run here)
BIGQUERY_SCHEMA = {
    "fields": [_bigquery_column(f) for f in schemas.latest(ExposureSummary.SCHEMA).raw["fields"]]
}


def is_avro(path: str) -> bool:
    return path.endswith(".avro")


def to_json_line(summary: ExposureSummary) -> str:
    return json.dumps(summary.to_json_dict(), separators=(",", ":"))


def _order(summary: ExposureSummary) -> tuple[str, int, int]:
    return (summary.instrument, summary.exposure, summary.revision)


class WriteSummaryFile(beam.PTransform):
    """Batch: every summary into exactly one file ``path`` (no shard suffix), sorted by
    (instrument, exposure, revision). One writer fed by a side input (cheaper than ``ToList | sort |
    WriteToText``), via a temporary name: a failed write leaves no partial file, no input an empty one."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def expand(self, summaries: beam.PCollection) -> Any:
        if is_avro(self.path):
            items = summaries | "ToRecord" >> beam.Map(lambda s: (_order(s), s.to_record()))
        else:
            # JSON lines are made before the gather: strings cross it with Beam's primitive
            # coder, where ExposureSummary objects (datetimes, enum) would fall back to pickle.
            items = summaries | "ToJson" >> beam.Map(lambda s: (_order(s), to_json_line(s)))
        return (
            summaries.pipeline
            | "Once" >> beam.Impulse()
            | "WriteFile" >> beam.ParDo(_WriteOneFile(self.path), beam.pvalue.AsList(items))
        )


class WriteDeadLetterFile(beam.PTransform):
    """Batch: dead-letter lines (JSON, each naming a bad input and why), sorted, into ``path``
    as WriteSummaryFile does (empty: nothing was bad)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def expand(self, lines: beam.PCollection) -> Any:
        items = lines | "Order" >> beam.Map(lambda line: (line, line))
        return (
            lines.pipeline
            | "Once" >> beam.Impulse()
            | "WriteFile" >> beam.ParDo(_WriteOneFile(self.path), beam.pvalue.AsList(items))
        )


class _WriteOneFile(beam.DoFn):
    """Writes all (order, payload) items, sorted, to ``path`` via a temporary name."""

    def __init__(self, path: str) -> None:
        self.path = path

    def process(self, _: Any, items: list[tuple[Any, Any]]) -> Iterator[str]:
        payloads = [payload for _, payload in sorted(items, key=lambda item: item[0])]
        compression = CompressionTypes.detect_compression_type(self.path)
        temporary = f"{self.path}.tmp-{uuid.uuid4().hex}"
        with FileSystems.create(temporary, compression_type=compression) as out:
            _write(out, self.path, payloads)
        FileSystems.rename([temporary], [self.path])
        yield self.path


class AppendSummariesToLocalFile(beam.DoFn):
    """Streaming file sink for single-worker runs (DirectRunner/Prism): appends each bundle to a
    local JSON-lines or Avro container file. On a distributed runner use Pub/Sub or BigQuery
    (or fileio.WriteToFiles with windowing) instead: workers do not share a local disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._buffer: list[ExposureSummary] = []

    def start_bundle(self) -> None:
        self._buffer = []

    def process(self, summary: ExposureSummary) -> Iterator[ExposureSummary]:
        self._buffer.append(summary)
        yield summary

    def finish_bundle(self) -> None:
        if not self._buffer:
            return
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payloads = [s.to_record() if is_avro(self.path) else to_json_line(s) for s in self._buffer]
        with path.open("a+b" if path.exists() and path.stat().st_size > 0 else "wb") as out:
            _mend_torn_end(out, self.path)
            _write(out, self.path, payloads)
        self._buffer = []


def _mend_torn_end(out: Any, path: str) -> None:
    """A kill mid-append leaves the file open in ``out`` ending inside a line: end it (it stays
    one unreadable line), or inside an Avro block: cut it off (or the whole file, a torn
    header). Its bundle was not committed: its summaries are emitted again."""
    from fastavro.read import SYNC_SIZE

    end = out.seek(0, os.SEEK_END)
    if end == 0:
        return
    if not is_avro(path):
        out.seek(-1, os.SEEK_END)
        if out.read(1) != b"\n":
            out.write(b"\n")
        return
    out.seek(0)
    try:
        fastavro.block_reader(out)  # reads the header, which ends with the file's sync marker
    except Exception:  # fastavro raises several types on a bad header
        out.truncate(0)
        return
    out.seek(out.tell() - SYNC_SIZE)
    sync = out.read(SYNC_SIZE)
    out.seek(end - SYNC_SIZE)
    if out.read(SYNC_SIZE) != sync:  # every whole block ends with it
        out.seek(0)
        out.truncate(out.read().rfind(sync) + SYNC_SIZE)


def _write(out: Any, path: str, payloads: list[Any]) -> None:
    """ExposureSummary records into an Avro container file (appended with the file's own codec),
    or JSON lines, by ``path``'s name."""
    if is_avro(path):
        fastavro.writer(out, schemas.latest(ExposureSummary.SCHEMA).parsed, payloads, codec="deflate")
    else:
        out.write("".join(line + "\n" for line in payloads).encode("utf-8"))


def read_summaries(path: str) -> list[ExposureSummary]:
    """Summaries from a JSON-lines or Avro file (local or any Beam filesystem, e.g. gs://)."""
    with FileSystems.open(path) as fh:
        if is_avro(path):
            return _read_avro(path, fh)
        text = fh.read().decode("utf-8", errors="replace")
    out: list[ExposureSummary] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line) if line else None
        except json.JSONDecodeError as exc:  # torn by a kill: its summary was emitted again
            log_event(log, "torn_summary_line", logging.WARNING, path=path, line=number, error=str(exc))
            continue
        if record is not None:
            out.append(ExposureSummary.from_json_dict(record))
    return out


def _read_avro(path: str, fh: Any) -> list[ExposureSummary]:
    """The summaries of an Avro file, up to a block torn by a kill (its summaries were emitted
    again, after it, once the file was appended to)."""
    out: list[ExposureSummary] = []
    records = avro.read_container(fh, ExposureSummary.SCHEMA)
    while True:
        try:
            record = next(records, None)
        except Exception as exc:  # fastavro raises several types on a torn block
            log_event(log, "torn_summary_block", logging.WARNING, path=path, error=repr(exc))
            return out
        if record is None:
            return out
        out.append(ExposureSummary.from_record(record))
