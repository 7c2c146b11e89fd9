"""The object-store contract shared by producers (writers) and functions (readers): writes are
create-once, so nothing is silently overwritten."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from obsingest.errors import ChecksumConflict


@dataclass(frozen=True)
class StoredObject:
    """What the store knows about one object (the fields GCS's object resource has)."""

    bucket: str
    name: str
    size: int
    crc32c: str  # base64, big-endian, as GCS
    md5_hash: str  # base64
    generation: int
    time_created: datetime
    metadata: dict[str, str] = field(default_factory=dict)
    uri: str = ""


@dataclass(frozen=True)
class PutResult:
    obj: StoredObject
    created: bool  # False: the same bytes were already there (idempotent retry)


@dataclass(frozen=True)
class Head:
    """The first bytes of an object and what the store says of the whole (``read_head``)."""

    data: bytes  # the first ``length`` bytes asked for; the whole object if it is shorter
    generation: int  # of the object the bytes came from
    crc32c: str  # the whole object's, as the store computed it when it was written


class ObjectConflict(ChecksumConflict):
    """Create-once write of different bytes under an existing name."""

    def __init__(self, message: str, existing: StoredObject, attempted_crc32c: str) -> None:
        super().__init__(message)
        self.existing = existing
        self.attempted_crc32c = attempted_crc32c


class ObjectStore(Protocol):
    """Minimal store API the pipeline needs; local directory and GCS implement it."""

    bucket: str

    def put(self, name: str, data: bytes, metadata: dict[str, str] | None = None) -> PutResult:
        """Create-once write: same bytes again -> created=False; different -> ObjectConflict."""
        ...

    def stat(self, name: str) -> StoredObject:
        """Metadata of an existing object; ObjectMissing when absent."""
        ...

    def read(self, name: str) -> bytes:
        """Whole object; ObjectMissing when absent."""
        ...

    def read_head(self, name: str, length: int) -> Head:
        """The first ``length`` bytes (a header) in one request, with the generation and
        CRC32C of the object they came from, so that a caller can tell that they belong to
        the version it was told about; ObjectMissing when absent."""
        ...

    def uri(self, name: str) -> str: ...
