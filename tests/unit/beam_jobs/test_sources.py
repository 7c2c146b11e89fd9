"""The batch source: raw and logical-type decoding agree, files split at Avro blocks, bad files
are dead letters that name them, empty patterns errors."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import fastavro
import pytest
from apache_beam.io import source_test_utils

import schemas
from beam_jobs.core import Arrival, to_micros
from beam_jobs.sources import BadInputFile, ExposureEventFiles, ReadExposureEvents, raw_arrival_schema
from beam_jobs.transforms import ARRIVAL, BAD, BAD_INPUT, MANIFEST
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary
from tests.unit.beam_jobs.helpers import arrival, exposure_id, manifest

pytestmark = pytest.mark.unit


def _events() -> list[ArrivalEvent]:
    # two runs of exposure 1 (a duplicate detector), exposure 2 on another day-less sequence
    events = [arrival(1, d, 15.0 + 0.01 * d, 1.0 + 0.25 * d) for d in range(9)]
    events += [arrival(1, 3, 15.03, 0.5, run="run2")]
    events += [arrival(2, d, 32.0, 2.0 + d) for d in range(5)]
    return events


def _write(path: Path, schema: dict[str, Any], records: list[dict[str, Any]], **kw: Any) -> str:
    with path.open("wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), records, codec="deflate", **kw)
    return str(path)


def _expected(events: list[ArrivalEvent]) -> list[tuple]:
    out = []
    for event in events:
        a = tuple(Arrival.from_event(event))
        out.append(((a[1], a[2]), (ARRIVAL, a)))
    return out


def _millis_schema() -> dict[str, Any]:
    """ArrivalEvent with timestamp-millis timestamps: not the raw path's primitives."""
    raw = copy.deepcopy(schemas.latest(ArrivalEvent.SCHEMA).raw)
    for f in raw["fields"]:
        if f["name"] in ("readout_time", "published_time", "registered_time"):
            f["type"] = {"type": "long", "logicalType": "timestamp-millis"}
    return raw


def test_raw_decoding_equals_logical_decoding(tmp_path: Path) -> None:
    events = _events()
    latest = schemas.latest(ArrivalEvent.SCHEMA).raw
    assert raw_arrival_schema(latest) is not None
    assert raw_arrival_schema(_millis_schema()) is None

    # another writer may spell the uuid in upper case; fastavro's UUID path reads it lower case
    records = [{**e.to_record(), "dataset_id": str(e.dataset_id).upper()} for e in events]
    raw_file = _write(tmp_path / "a.avro", latest, records)
    millis_file = _write(tmp_path / "m.avro", _millis_schema(), records)

    raw = source_test_utils.read_from_source(ExposureEventFiles(raw_file))
    logical = source_test_utils.read_from_source(ExposureEventFiles(millis_file))
    assert raw == logical == _expected(events)
    # the raw path yields what Arrival.from_record would: str ids, int microseconds
    (key, (kind, payload)) = raw[0]
    assert key == ("LSSTComCam", exposure_id(1)) and kind == ARRIVAL
    assert isinstance(payload[0], str) and payload[5] == to_micros(events[0].readout_time)


def test_manifests_are_keyed_and_other_contracts_are_errors(tmp_path: Path) -> None:
    manifests = [manifest(1), manifest(2, range(5), start=17.0)]
    path = _write(
        tmp_path / "manifests.avro",
        schemas.latest(ExposureManifest.SCHEMA).raw,
        [m.to_record() for m in manifests],
    )
    got = source_test_utils.read_from_source(ExposureEventFiles(path))
    assert got == [((m.instrument, m.exposure), (MANIFEST, m)) for m in manifests]

    other = _write(tmp_path / "summaries.avro", schemas.latest(ExposureSummary.SCHEMA).raw, [])
    [(file, error)] = _dead_letters(source_test_utils.read_from_source(ExposureEventFiles(other)))
    assert file == other and error.startswith(f"{other}: holds ExposureSummary")

    garbage = tmp_path / "garbage.avro"
    garbage.write_bytes(b"this is not avro at all" * 10)
    [(file, error)] = _dead_letters(source_test_utils.read_from_source(ExposureEventFiles(str(garbage))))
    assert file == str(garbage) and error.startswith(f"{garbage}: not an Avro container")


def _dead_letters(elements: list) -> list[tuple[str, str]]:
    """The (file, error) of every dead-letter element (all of them are at the end)."""
    out = []
    for key, (kind, _) in elements:
        if key[1] == BAD_INPUT:
            assert kind == BAD
            line = json.loads(key[0])
            assert line["reason"] == BadInputFile.reason == "bad-input-file"
            out.append((line["file"], line["error"]))
    return out


def test_split_ranges_read_every_record_exactly_once(tmp_path: Path) -> None:
    events = [arrival(seq, d, 17.0 * seq, 1.0 + d / 10) for seq in range(1, 30) for d in range(9)]
    path = _write(
        tmp_path / "a.avro",
        schemas.latest(ArrivalEvent.SCHEMA).raw,
        [e.to_record() for e in events],
        sync_interval=400,  # many small blocks
    )
    source = ExposureEventFiles(path)
    splits = list(source.split(desired_bundle_size=Path(path).stat().st_size // 7))
    assert len(splits) >= 5
    source_test_utils.assert_sources_equal_reference_source(
        (source, None, None), [(s.source, s.start_position, s.stop_position) for s in splits]
    )
    whole = source_test_utils.read_from_source(source)
    assert sorted(whole) == sorted(_expected(events))
    # dynamic splitting (the runner taking back the rest of a range) keeps exactly-once too
    single = splits[0]
    source_test_utils.assert_split_at_fraction_exhaustive(
        single.source, single.start_position, single.stop_position, perform_multi_threaded_test=False
    )


def test_a_pattern_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"No files found based on the file pattern .*nothing-\*"):
        ReadExposureEvents([str(tmp_path / "nothing-*.avro")])


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_a_corrupt_block_is_an_error_naming_the_file(tmp_path: Path, codec: str) -> None:
    events = [arrival(seq, d, 17.0 * seq, 1.0) for seq in range(1, 10) for d in range(9)]
    path = tmp_path / f"broken-{codec}.avro"
    with path.open("wb") as out:
        fastavro.writer(
            out,
            schemas.latest(ArrivalEvent.SCHEMA).parsed,
            [e.to_record() for e in events],
            codec=codec,
            sync_interval=1_000_000,  # one data block
        )
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    got = source_test_utils.read_from_source(ExposureEventFiles(str(path)))
    # what decodes before the damage is read; the damage is one dead letter naming the file
    [(file, error)] = _dead_letters(got)
    assert file == str(path) and re.match(rf".*broken-{codec}\.avro: (unreadable|record)", error)
    good = max(len(got) - 2, 0)  # the record the damage starts in may decode (codec null: no checksum)
    assert got[:good] == _expected(events)[:good]
