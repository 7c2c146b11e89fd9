"""Splitting a compressed CCD into CcdChunk records: pure arithmetic, no Kafka. A chunk of at
most ``message_max_bytes - RECORD_RESERVE`` always fits a record (producers/kafka/README.md,
"Chunk size arithmetic").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.messages import CcdChunk

#: Everything in a Kafka record batch besides the chunk payload.
RECORD_RESERVE = 4 * 1024
MAX_NAME_BYTES = 1024
#: Upper bound of the default chunk payload (bigger buys no throughput, costs memory/latency).
PREFERRED_CHUNK_SIZE = 8 * 1024 * 1024
#: Smallest chunk we accept: below this the per-record overhead dominates.
MIN_CHUNK_SIZE = 4 * 1024


class ChunkSizeError(ValueError):
    """A chunk size that cannot fit the record limit (a configuration error, caught at start)."""


def max_chunk_size(message_max_bytes: int) -> int:
    """Largest payload whose encoded record still fits ``message_max_bytes``."""
    return message_max_bytes - RECORD_RESERVE


def default_chunk_size(message_max_bytes: int) -> int:
    """Largest power of two that fits the record limit, at most PREFERRED_CHUNK_SIZE."""
    limit = max_chunk_size(message_max_bytes)
    if limit < MIN_CHUNK_SIZE:
        raise ChunkSizeError(f"message.max.bytes {message_max_bytes} is too small for chunks")
    return 1 << (min(limit, PREFERRED_CHUNK_SIZE).bit_length() - 1)


def resolve_chunk_size(chunk_size: int, message_max_bytes: int) -> int:
    """The configured chunk size (0 = default), refused if an encoded record could not fit."""
    if chunk_size == 0:
        return default_chunk_size(message_max_bytes)
    if not MIN_CHUNK_SIZE <= chunk_size <= max_chunk_size(message_max_bytes):
        raise ChunkSizeError(
            f"chunk size {chunk_size} outside {MIN_CHUNK_SIZE}..{max_chunk_size(message_max_bytes)}"
            f" (message.max.bytes {message_max_bytes} minus {RECORD_RESERVE} bytes of framing)"
        )
    return chunk_size


def chunk_count(total_size: int, chunk_size: int) -> int:
    """Chunks needed for ``total_size`` bytes; an empty file still travels as one empty chunk."""
    return max(1, -(-total_size // chunk_size))


def _varint(value: int) -> bytes:
    """Avro long encoding (zig-zag varint) of a non-negative ``value``."""
    n = value << 1
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def iter_chunks(
    data_id: DataId,
    data: bytes,
    readout_time: datetime,
    compressed_time: datetime | None,
    producer: str,
    chunk_size: int,
) -> Iterator[CcdChunk]:
    """The CcdChunk records of one file, in order (payloads are slices of ``data``)."""
    if len(data_id.instrument.encode()) > MAX_NAME_BYTES or len(producer.encode()) > MAX_NAME_BYTES:
        raise ChunkSizeError(f"instrument/producer name longer than {MAX_NAME_BYTES} bytes")
    count = chunk_count(len(data), chunk_size)
    checksum = checksum_str(data)
    view = memoryview(data)
    for index in range(count):
        payload = bytes(view[index * chunk_size : (index + 1) * chunk_size])
        yield CcdChunk(
            instrument=data_id.instrument,
            exposure=data_id.exposure,
            detector=data_id.detector,
            day_obs=data_id.day_obs,
            chunk_index=index,
            chunk_count=count,
            total_size=len(data),
            file_checksum=checksum,
            chunk_checksum=checksum_str(payload),
            readout_time=readout_time,
            compressed_time=compressed_time,
            producer=producer,
            payload=payload,
        )


def encode_chunk(chunk: CcdChunk) -> bytes:
    """``chunk.encode()`` with one payload copy (producers/kafka/README.md): the encoding with an
    empty payload (whose length varint is the single byte 00), then the payload's length and bytes."""
    head = dataclasses.replace(chunk, payload=b"").encode()
    return b"".join((head[:-1], _varint(len(chunk.payload)), chunk.payload))
