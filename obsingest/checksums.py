"""Checksums as the object store computes them, so producer, store and registry compare like
with like: CRC32C, which GCS always has (it has no MD5 for composite objects, and the local
store computes none)."""

from __future__ import annotations

import base64

import google_crc32c


def crc32c(data: bytes) -> int:
    return int(google_crc32c.value(data))


def crc32c_b64(data: bytes) -> str:
    """Base64 of the big-endian CRC32C, GCS's ``crc32c`` field format."""
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


def checksum_str(data: bytes) -> str:
    """The canonical checksum string carried in messages and the registry: ``crc32c:<8 hex>``."""
    return f"crc32c:{crc32c(data):08x}"


def checksum_from_crc32c_b64(value: str) -> str:
    """Canonical string from GCS's base64 crc32c field."""
    raw = base64.b64decode(value)
    if len(raw) != 4:
        raise ValueError(f"crc32c field {value!r} is not 4 bytes")
    return f"crc32c:{int.from_bytes(raw, 'big'):08x}"
