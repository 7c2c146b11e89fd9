"""Avro single-object encoding (Avro spec: magic C3 01, 8-byte CRC-64-AVRO fingerprint, body).

Every message names the schema that wrote it, so any Avro library can decode it and readers on a
newer schema resolve old messages to their own version.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, cast

import fastavro

import schemas
from obsingest.errors import BadMessage

MAGIC = b"\xc3\x01"
HEADER_SIZE = 10
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode(name: str, record: dict[str, Any]) -> bytes:
    """Encode ``record`` with the newest version of contract ``name``."""
    sv = schemas.latest(name)
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(sv.fingerprint)
    try:
        fastavro.schemaless_writer(buf, sv.parsed, record)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise BadMessage(f"record does not match {sv.label}: {exc}") from exc
    return buf.getvalue()


def writer_schema(message: bytes) -> schemas.SchemaVersion:
    """Which schema wrote ``message`` (raises BadMessage when the header is not ours)."""
    if len(message) < HEADER_SIZE or message[:2] != MAGIC:
        raise BadMessage("not Avro single-object encoded (missing C3 01 magic)")
    sv = schemas.by_fingerprint().get(message[2:HEADER_SIZE])
    if sv is None:
        raise BadMessage(f"unknown schema fingerprint {message[2:HEADER_SIZE].hex()}")
    return sv


def decode(message: bytes, expect: str | None = None) -> tuple[str, dict[str, Any]]:
    """Decode to (contract name, record), resolving old writer versions to the newest reader."""
    writer = writer_schema(message)
    if expect is not None and writer.name != expect:
        raise BadMessage(f"expected a {expect} message, got {writer.label}")
    reader = schemas.latest(writer.name)
    body = io.BytesIO(message)  # shares the bytes (no copy of a multi-MiB chunk payload)
    body.seek(HEADER_SIZE)
    try:
        record = cast(dict[str, Any], fastavro.schemaless_reader(body, writer.parsed, reader.parsed))
    except Exception as exc:  # fastavro raises a variety of types on garbage input
        raise BadMessage(f"undecodable {writer.label} body: {exc}") from exc
    return writer.name, record


def _opened(path: Path | BinaryIO, mode: str) -> AbstractContextManager[Any]:
    return path.open(mode) if isinstance(path, Path) else nullcontext(path)


def write_container(path: Path | BinaryIO, name: str, records: Iterable[dict[str, Any]]) -> None:
    """Write an Avro object container file (the archive format: schema in the header)."""
    with _opened(path, "wb") as out:
        fastavro.writer(out, schemas.latest(name).parsed, records, codec="deflate")


def read_container(path: Path | BinaryIO, name: str | None = None) -> Iterator[dict[str, Any]]:
    """Read an Avro container file, resolving to the newest version of ``name`` when given."""
    reader_schema = schemas.latest(name).parsed if name else None
    with _opened(path, "rb") as fh:
        yield from cast(Iterator[dict[str, Any]], fastavro.reader(fh, reader_schema))
