"""One backfill worker process: upload a batch of files create-once and verify each.

Each file is stored under the name its own primary header gives (where the register function and
``obsingest reconcile`` take it); one that cannot say which CCD it is fails with its reason. A
file is done only when the CRC32C and size the *store* reports for its object (the upload's
response, or the existing object's) match what was read from disk: no extra request per file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from obsingest.checksums import checksum_from_crc32c_b64, crc32c_b64
from obsingest.dataid import identity_from_header
from obsingest.errors import ChecksumMismatch, ObsIngestError
from obsingest.fits import parse_primary
from obsingest.settings import StoreSettings
from obsingest.store import ObjectConflict, open_store


@dataclass(frozen=True)
class FileResult:
    key: str
    ok: bool
    status: Literal["", "stored", "exists"] = ""
    size: int = 0
    checksum: str = ""
    retriable: bool = False
    reason: str = ""
    error: str = ""
    #: the object the file is stored as (from its header)
    object: str = ""


def split_destination(url: str) -> tuple[str, str]:
    """``gs://BUCKET/PREFIX`` -> (``gs://BUCKET``, ``PREFIX/``); ``file://DIR`` -> (url, '')."""
    if url.startswith("gs://"):
        bucket, _, prefix = url[len("gs://") :].partition("/")
        if not bucket:
            raise ValueError(f"destination {url!r} has no bucket")
        prefix = prefix.strip("/")
        return f"gs://{bucket}", f"{prefix}/" if prefix else ""
    if url.startswith("file://"):
        return url, ""
    raise ValueError(f"unsupported backfill destination {url!r} (gs://BUCKET[/PREFIX], file://DIR)")


class UploadWorker:
    """One per worker process, built once: its store keeps one kept-alive connection."""

    def __init__(self, store_url: str, prefix: str = "") -> None:
        self.prefix = prefix
        self.store: Any = open_store(StoreSettings(url=store_url))

    def __call__(self, batch: list[tuple[str, str]]) -> list[FileResult]:
        """``batch``: (journal key, file path) pairs."""
        return [self.one(name, path) for name, path in batch]

    def one(self, key: str, path: str) -> FileResult:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO's read would wait for ever
                return FileResult(key, False, reason="not-a-file", error=f"{path}: not a regular file")
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return FileResult(
                key, False, reason="source-vanished", error=f"{path}: vanished before it was read"
            )
        except OSError as exc:
            return FileResult(key, False, retriable=True, reason="source-unreadable", error=f"{path}: {exc}")
        try:
            name = identity_from_header(parse_primary(data).str_value, path).object_name(self.prefix)
        except ObsIngestError as exc:  # not FITS, no identity, an instrument we do not ingest
            error = str(exc) if str(exc).startswith(path) else f"{path}: {exc}"
            return FileResult(key, False, size=len(data), reason=exc.reason, error=error[:1000])
        crc = crc32c_b64(data)
        checksum = checksum_from_crc32c_b64(crc)  # one CRC pass for both forms
        try:
            put = self.store.put(name, data, {"obsingest-checksum": checksum})
            created, size, stored_crc = put.created, put.obj.size, put.obj.crc32c
            if size != len(data) or stored_crc != crc:
                raise ChecksumMismatch(
                    f"{name}: store holds {size} B crc32c {stored_crc}, {path} has {len(data)} B crc32c {crc}"
                )
        except ObsIngestError as exc:  # ObjectConflict (permanent) among them
            error = f"{path}: {exc}" if isinstance(exc, ObjectConflict) else str(exc)[:1000]
            return FileResult(
                key,
                False,
                object=name,
                size=len(data),
                checksum=checksum,
                retriable=exc.retriable,
                reason=exc.reason,
                error=error,
            )
        return FileResult(key, True, "stored" if created else "exists", len(data), checksum, object=name)

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
