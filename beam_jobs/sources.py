"""Batch input: archived ArrivalEvent and ExposureManifest Avro files, read as keyed elements
``((instrument, exposure), (kind, payload))`` for the per-exposure fold. Not ``beam.io.ReadFromAvro``
(``benchmarks/beam_batch.py`` measures why): ArrivalEvent blocks are decoded with logical types
removed, so ids and times read as the primitives ``Arrival`` wants (other writer schemas take
``Arrival.from_record``); and one ``ReadAllFiles`` read feeds the lifted CombinePerKey in one fused
stage, where a ``Flatten`` of two reads would be materialized on the DirectRunner. A file of
another contract, not Avro, truncated or corrupt, or a record missing a needed field, is skipped
as a dead-letter element naming the file and why; the rest is read.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import apache_beam as beam
import fastavro
from apache_beam.io.filebasedsource import FileBasedSource, ReadAllFiles
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.iobase import RangeTracker
from apache_beam.metrics import Metrics
from fastavro.read import SYNC_SIZE

from beam_jobs.core import Arrival, ExposureKey
from beam_jobs.transforms import ARRIVAL, BAD, BAD_INPUT, NAMESPACE, key_arrival, key_manifest
from obsingest.errors import PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureManifest

#: ArrivalEvent fields the summary reads, with the (type, logicalType) the raw fast path needs.
_RAW_ARRIVAL_FIELDS: dict[str, tuple[set[str], str | None]] = {
    "dataset_id": ({"string"}, "uuid"),
    "instrument": ({"string"}, None),
    "exposure": ({"int", "long"}, None),
    "detector": ({"int", "long"}, None),
    "day_obs": ({"int", "long"}, None),
    "readout_time": ({"long"}, "timestamp-micros"),
    "published_time": ({"long"}, "timestamp-micros"),
}

log = get_logger("beam_jobs.sources")
_BAD_INPUT_COUNTER = Metrics.counter(NAMESPACE, "bad_input_files")

_DESIRED_BUNDLE_BYTES = 64 << 20
_MIN_BUNDLE_BYTES = 1 << 20


class BadInputFile(PermanentError, ValueError, reason="bad-input-file"):
    """An input file that is not an ArrivalEvent or ExposureManifest container, or whose records
    lack what the summary needs."""


def bad_input(file_name: str, exc: BadInputFile) -> tuple[ExposureKey, tuple[str, None]]:
    """The dead-letter element of a bad file, block or record: keyed (JSON line naming the file
    and why, :data:`BAD_INPUT`), so it rides the fold to the batch job's ``bad`` output."""
    _BAD_INPUT_COUNTER.inc()
    log_event(log, "bad_input_file", logging.WARNING, path=file_name, error=str(exc))
    line = json.dumps({"file": file_name, "reason": exc.reason, "error": str(exc)})
    return ((line, BAD_INPUT), (BAD, None))


def _primitive(field_type: Any) -> tuple[str | None, str | None]:
    if isinstance(field_type, str):
        return field_type, None
    if isinstance(field_type, dict) and isinstance(field_type.get("type"), str):
        return field_type["type"], field_type.get("logicalType")
    return None, None  # unions, records, arrays: not a raw primitive


def raw_arrival_schema(writer_schema: dict[str, Any]) -> Any | None:
    """The writer schema with logical types removed, or None when a field the summary reads is
    not the primitive the raw path expects (then records are decoded the ordinary way)."""
    fields = {f["name"]: f["type"] for f in writer_schema.get("fields", [])}
    for name, (types, logical) in _RAW_ARRIVAL_FIELDS.items():
        kind, found = _primitive(fields.get(name))
        if kind not in types or found != logical:
            return None
    # a copy without any "logicalType" key
    raw = json.loads(
        json.dumps(writer_schema), object_hook=lambda d: {k: v for k, v in d.items() if k != "logicalType"}
    )
    return fastavro.parse_schema(raw)  # marked as parsed: schemaless_reader skips re-parsing


class ExposureEventFiles(FileBasedSource):
    """Avro container files of ArrivalEvents or ExposureManifests -> keyed elements; splittable
    at Avro block boundaries like Beam's own Avro source."""

    def __init__(self, file_pattern: str) -> None:
        super().__init__(file_pattern, compression_type=CompressionTypes.UNCOMPRESSED, validate=False)

    def read_records(self, file_name: str, range_tracker: RangeTracker) -> Iterator[Any]:
        """The range's keyed elements; a bad file or block ends it with one :func:`bad_input`
        element (what was read of it counts), a bad record ends its block with one."""
        try:
            yield from self._read(file_name, range_tracker)
        except BadInputFile as exc:
            yield bad_input(file_name, exc)

    def _read(self, file_name: str, range_tracker: RangeTracker) -> Iterator[Any]:
        next_block_start = -1

        def split_points_unclaimed(stop_position: int) -> int | object:
            return 0 if next_block_start >= stop_position else RangeTracker.SPLIT_POINTS_UNKNOWN

        range_tracker.set_split_points_unclaimed_callback(split_points_unclaimed)
        start_offset = range_tracker.start_position() or 0
        with self.open_file(file_name) as f:
            try:
                blocks = fastavro.block_reader(f)
            except Exception as exc:  # fastavro raises several types on a bad header
                raise BadInputFile(f"{file_name}: not an Avro container file: {exc}") from exc
            header_end = f.tell()
            f.seek(header_end - SYNC_SIZE)  # the header ends with the file's sync marker
            sync_marker = f.read(SYNC_SIZE)
            decode = self._decoder(file_name, cast(dict[str, Any], blocks.writer_schema))
            # Start at the first block after ``start_offset``; back up over a sync marker the
            # previous range may have ended inside.
            f.seek(max(0, start_offset - SYNC_SIZE))
            _advance_past_sync_marker(f, sync_marker)
            next_block_start = f.tell()
            while range_tracker.try_claim(next_block_start):
                try:
                    block = next(blocks)
                except Exception as exc:  # a truncated or corrupt block: zlib, EOF, ...
                    raise BadInputFile(
                        f"{file_name}: unreadable Avro block at byte {next_block_start}: {exc!r}"
                    ) from exc
                next_block_start = block.offset + block.size
                try:
                    yield from decode(block)
                except BadInputFile as exc:  # the next blocks are whole: they still count
                    yield bad_input(file_name, exc)

    @staticmethod
    def _decoder(file_name: str, writer_schema: dict[str, Any]) -> Any:
        contract = str(writer_schema.get("name", "")).rsplit(".", 1)[-1]  # org.obsingest.X -> X
        if contract == ArrivalEvent.SCHEMA:
            raw = raw_arrival_schema(writer_schema)
            if raw is not None:
                return lambda block: _raw_arrivals(file_name, block, raw)
            return lambda block: _records(file_name, block, contract, _arrival)
        if contract == ExposureManifest.SCHEMA:
            return lambda block: _records(file_name, block, contract, _manifest)
        raise BadInputFile(
            f"{file_name}: holds {contract or 'an unnamed schema'}, expected "
            f"{ArrivalEvent.SCHEMA} or {ExposureManifest.SCHEMA} records"
        )


def _raw_arrivals(file_name: str, block: Any, raw_schema: Any) -> Iterator[tuple]:
    data = block.bytes_
    read = cast(Callable[..., dict[str, Any]], fastavro.schemaless_reader)
    for index in range(block.num_records):
        try:
            r = read(data, raw_schema, None)
        except Exception as exc:  # fastavro raises several types on bad bytes
            raise BadInputFile(
                f"{file_name}: record {index} of the block at byte {block.offset} does not decode: {exc!r}"
            ) from exc
        arrival = (
            r["dataset_id"].lower(),  # as str(uuid.UUID(...)) spells it, whatever the writer did
            r["instrument"],
            r["exposure"],
            r["detector"],
            r["day_obs"],
            r["readout_time"],
            r["published_time"],
        )
        yield ((arrival[1], arrival[2]), (ARRIVAL, arrival))


def _records(
    file_name: str, block: Any, contract: str, convert: Callable[[dict[str, Any]], Any]
) -> Iterator[Any]:
    """The block's records with fastavro's logical types through ``convert``; bad bytes reported
    like the raw path, an unusable record naming its contract."""
    records = iter(block)
    for index in range(block.num_records):
        try:
            record = next(records)
        except Exception as exc:  # fastavro raises several types on bad bytes
            raise BadInputFile(
                f"{file_name}: record {index} of the block at byte {block.offset} does not decode: {exc!r}"
            ) from exc
        try:
            yield convert(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInputFile(f"{file_name}: {contract} record unusable: {exc!r}") from exc


def _arrival(record: dict[str, Any]) -> Any:
    return key_arrival(Arrival.from_record(record))


def _manifest(record: dict[str, Any]) -> Any:
    return key_manifest(ExposureManifest.from_record(record))


def _advance_past_sync_marker(f: Any, sync_marker: bytes) -> None:
    """Seek just past the next sync marker (as Beam's Avro source does, in a private helper)."""
    data = f.read(10_000)
    while data:
        pos = data.find(sync_marker)
        if pos >= 0:
            f.seek(-(len(data) - pos - len(sync_marker)), os.SEEK_CUR)
            return
        if len(data) >= len(sync_marker):
            f.seek(-(len(sync_marker) - 1), os.SEEK_CUR)  # the marker may straddle two reads
        data = f.read(10_000)


class ReadExposureEvents(beam.PTransform):
    """Every file matched by ``patterns`` (globs, any Beam filesystem) -> keyed elements; a pattern
    that matches nothing is an error at construction, as with ``beam.io.ReadFromAvro``."""

    def __init__(self, patterns: Sequence[str]) -> None:
        super().__init__()
        self.patterns = list(patterns)
        for pattern in self.patterns:
            if not FileSystems.match([pattern], limits=[1])[0].metadata_list:
                raise OSError(f"No files found based on the file pattern {pattern}")

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            # Impulse + FlatMap rather than Create: Create reshuffles more than one element, and
            # ReadAllFiles reshuffles the file ranges anyway.
            | "Impulse" >> beam.Impulse()
            | "Patterns" >> beam.FlatMap(lambda _, patterns: patterns, self.patterns)
            | "ReadFiles"
            >> ReadAllFiles(
                splittable=True,
                compression_type=CompressionTypes.UNCOMPRESSED,
                desired_bundle_size=_DESIRED_BUNDLE_BYTES,
                min_bundle_size=_MIN_BUNDLE_BYTES,
                source_from_file=ExposureEventFiles,
            )
        )
