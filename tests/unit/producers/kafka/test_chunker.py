"""Chunking arithmetic, the one-copy encoder, and plain-fastavro interop."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import fastavro
import pytest

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.messages import CcdChunk
from producers.kafka.chunker import (
    MIN_CHUNK_SIZE,
    RECORD_RESERVE,
    ChunkSizeError,
    chunk_count,
    default_chunk_size,
    encode_chunk,
    iter_chunks,
    max_chunk_size,
    resolve_chunk_size,
)

pytestmark = pytest.mark.unit

DATA_ID = DataId("LSSTCam", 2026112200042, 94)
READOUT = datetime(2026, 11, 22, 3, 0, 1, 123456, tzinfo=UTC)
COMPRESSED = datetime(2026, 11, 22, 3, 0, 1, 500000, tzinfo=UTC)
SCHEMA_FILE = Path(__file__).parents[4] / "schemas" / "avro" / "CcdChunk.v1.avsc"


def chunks(data: bytes, size: int, producer: str = "edge-1") -> list[CcdChunk]:
    return list(iter_chunks(DATA_ID, data, READOUT, COMPRESSED, producer, size))


@pytest.mark.parametrize(
    ("total", "size", "expected"),
    [(0, 1024, 1), (1, 1024, 1), (1024, 1024, 1), (1025, 1024, 2), (15_137_280, 1 << 20, 15)],
)
def test_chunk_count_is_ceiling_with_one_chunk_for_empty_files(total, size, expected):
    assert chunk_count(total, size) == expected


def test_default_chunk_size_is_a_power_of_two_that_fits_the_record_limit():
    assert default_chunk_size(16 * 1024 * 1024) == 8 * 1024 * 1024
    assert default_chunk_size(1024 * 1024) == 512 * 1024  # 1 MiB - reserve -> 512 KiB
    assert default_chunk_size(1024 * 1024 + RECORD_RESERVE) == 1024 * 1024
    with pytest.raises(ChunkSizeError):
        default_chunk_size(RECORD_RESERVE + MIN_CHUNK_SIZE - 1)


def test_configured_chunk_size_must_leave_room_for_framing():
    assert resolve_chunk_size(0, 16 << 20) == 8 << 20
    assert resolve_chunk_size(max_chunk_size(16 << 20), 16 << 20) == (16 << 20) - RECORD_RESERVE
    with pytest.raises(ChunkSizeError):
        resolve_chunk_size((16 << 20) - RECORD_RESERVE + 1, 16 << 20)
    with pytest.raises(ChunkSizeError):
        resolve_chunk_size(MIN_CHUNK_SIZE - 1, 16 << 20)


def test_worst_case_record_fits_the_limit():
    """Longest names, largest ids, the largest allowed payload: still below message.max.bytes."""
    limit = 64 * 1024 + RECORD_RESERVE
    size = resolve_chunk_size(64 * 1024, limit)
    worst = DataId("LSSTCam", 2200_12_31_99999, 188)
    data = os.urandom(size * 2)
    [first, _] = iter_chunks(worst, data, READOUT, COMPRESSED, "p" * 1024, size)
    record_framing = 61 + 30 + len(worst.key)  # batch header + record varints + key
    assert len(encode_chunk(first)) + record_framing <= limit


def test_chunks_cover_the_file_in_order_with_checksums():
    data = os.urandom(10_000)
    parts = chunks(data, 4096)
    assert [c.chunk_index for c in parts] == [0, 1, 2]
    assert {c.chunk_count for c in parts} == {3}
    assert {c.total_size for c in parts} == {10_000}
    assert {c.file_checksum for c in parts} == {checksum_str(data)}
    assert b"".join(c.payload for c in parts) == data
    assert [len(c.payload) for c in parts] == [4096, 4096, 1808]
    assert all(c.chunk_checksum == checksum_str(c.payload) for c in parts)
    assert {(c.instrument, c.exposure, c.detector, c.day_obs) for c in parts} == {
        ("LSSTCam", 2026112200042, 94, 20261122)
    }


def test_empty_file_travels_as_one_empty_chunk():
    [only] = chunks(b"", 4096)
    assert (only.chunk_index, only.chunk_count, only.total_size, only.payload) == (0, 1, 0, b"")


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 300_000])
def test_one_copy_encoder_matches_fastavro_byte_for_byte(size):
    data = os.urandom(size)
    for chunk in chunks(data, max(MIN_CHUNK_SIZE, size or MIN_CHUNK_SIZE)):
        assert encode_chunk(chunk) == chunk.encode()
        assert CcdChunk.decode(encode_chunk(chunk)) == chunk


def test_a_consumer_with_only_the_schema_file_and_fastavro_decodes_chunks():
    """The interop recipe of producers/kafka/README.md, verbatim."""
    data = os.urandom(9000)
    message = encode_chunk(chunks(data, 4096)[1])

    schema = fastavro.parse_schema(json.loads(SCHEMA_FILE.read_text()))
    assert message[:2] == b"\xc3\x01"  # single-object magic; message[2:10] is the fingerprint
    record = fastavro.schemaless_reader(io.BytesIO(message[10:]), schema)

    assert record["payload"] == data[4096:8192]
    assert record["chunk_index"] == 1
    assert record["chunk_count"] == 3
    assert record["readout_time"] == READOUT
    assert record["file_checksum"] == checksum_str(data)


def test_names_longer_than_the_reserve_allows_are_refused():
    with pytest.raises(ChunkSizeError):
        chunks(b"x", 4096, producer="p" * 1025)
