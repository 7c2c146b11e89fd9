"""Record-level checks of CcdChunk records: what one chunk can tell without any other."""

from __future__ import annotations

from enum import StrEnum

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import BadMessage, BadObjectName, ObsIngestError, PermanentError
from obsingest.messages import CcdChunk


class PoisonReason(StrEnum):
    """``dlq_reason`` header values of dead-lettered records."""

    UNDECODABLE = "undecodable"
    WRONG_SCHEMA = "wrong-schema"
    BAD_DATA_ID = "bad-data-id"
    BAD_CHUNK = "bad-chunk"  # index out of range, count < 1, negative size
    CHUNK_CHECKSUM = "chunk-checksum-mismatch"
    CHUNK_CONFLICT = "chunk-conflict"  # same index again with different bytes
    FILE_CHANGED = "file-metadata-changed"  # count / size / file checksum changed mid-file
    FILE_CHECKSUM = "file-checksum-mismatch"
    FILE_SIZE = "file-size-mismatch"
    INCOMPLETE = "incomplete"


class ChunkPoison(PermanentError):
    """One record (or one assembled file) that can never become a valid CCD."""

    reasons = tuple(PoisonReason)

    def __init__(self, reason: PoisonReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def decode_chunk(value: bytes | None) -> CcdChunk:
    """Decode one record; ChunkPoison(undecodable | wrong-schema) if it is not a CcdChunk."""
    from obsingest import avro

    if not value:
        raise ChunkPoison(PoisonReason.UNDECODABLE, "empty record")
    try:
        writer = avro.writer_schema(value)
    except BadMessage as exc:
        raise ChunkPoison(PoisonReason.UNDECODABLE, str(exc)) from None
    if writer.name != CcdChunk.SCHEMA:
        raise ChunkPoison(PoisonReason.WRONG_SCHEMA, f"a {writer.label} record, not a CcdChunk")
    try:
        return CcdChunk.decode(value)
    except (BadMessage, TypeError, ValueError) as exc:
        raise ChunkPoison(PoisonReason.UNDECODABLE, str(exc)) from None


def validate_chunk(chunk: CcdChunk) -> DataId:
    """Data id, ranges, payload checksum."""
    try:
        data_id = DataId(chunk.instrument, chunk.exposure, chunk.detector)
    except (BadObjectName, ObsIngestError) as exc:
        raise ChunkPoison(PoisonReason.BAD_DATA_ID, str(exc)) from None
    key = data_id.key
    if chunk.day_obs != data_id.day_obs:
        raise ChunkPoison(PoisonReason.BAD_DATA_ID, f"{key}: day_obs {chunk.day_obs} does not match exposure")
    if chunk.chunk_count < 1 or chunk.total_size < 0:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK, f"{key}: chunk_count {chunk.chunk_count}, total_size {chunk.total_size}"
        )
    if not 0 <= chunk.chunk_index < chunk.chunk_count:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK,
            f"{key}: chunk_index {chunk.chunk_index} outside 0..{chunk.chunk_count - 1}",
        )
    if len(chunk.payload) > chunk.total_size:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK,
            f"{key}: chunk of {len(chunk.payload)} bytes in a file of {chunk.total_size}",
        )
    actual = checksum_str(chunk.payload)
    if actual != chunk.chunk_checksum:
        raise ChunkPoison(
            PoisonReason.CHUNK_CHECKSUM,
            f"{key}: chunk {chunk.chunk_index} has {actual}, record says {chunk.chunk_checksum}",
        )
    return data_id


def chunk_stride(chunk: CcdChunk) -> int | None:
    """The chunk size the producer cut this file with, None when the chunk does not tell (an
    only chunk, or a last one fitting no equal cut)."""
    count, size = chunk.chunk_count, len(chunk.payload)
    if count == 1:
        return None
    if chunk.chunk_index < count - 1:
        return size
    stride, rest = divmod(chunk.total_size - size, count - 1)
    return stride if rest == 0 and 0 < size <= stride else None


def chunk_key(chunk: CcdChunk) -> str:
    """The data id a chunk names, as text, even when it is not a valid one (for the DLQ)."""
    return f"{chunk.instrument}/{chunk.exposure}/{chunk.detector:03d}"
