"""Local-directory object store: the embedded default, with GCS's semantics where they matter.

Writes are fsynced and create-once (temp file, then ``link``); metadata is a JSON sidecar (no
MD5: too costly, as for GCS composites). Each new object's CloudEvent is staged in a durable
outbox before the link and promoted after, so none loses its notification (ack = delete the file).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from obsingest.checksums import crc32c_b64
from obsingest.errors import BadObjectName, ObjectMissing
from obsingest.exhaustion import as_exhausted
from obsingest.fileio import flocked, write_atomic
from obsingest.store.base import Head, ObjectConflict, PutResult, StoredObject
from obsingest.store.notifications import object_resource, storage_cloudevent, stored_from_resource

META_DIR = ".meta"
OUTBOX_DIR = ".notifications"
DLQ_DIR = ".notifications-dlq"
TMP_DIR = ".tmp"
#: a put's temporary file this old belongs to a put that died (a live one writes its own outside
#: the lock, so a young one may be in use)
ORPHAN_SECONDS = 3600.0


class LocalDirStore:
    """A bucket as a directory. Safe for concurrent writers in several processes on one host."""

    def __init__(self, root: Path | str, bucket: str = "local", notify: bool = True) -> None:
        self.root = Path(root).resolve()
        self.bucket = bucket
        self.notify = notify
        try:
            for sub in (META_DIR, OUTBOX_DIR, DLQ_DIR, TMP_DIR):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            with flocked(self.root / ".lock"):
                self._recover()
        except OSError as exc:
            exhausted = as_exhausted(exc, "destination", str(self.root))
            if exhausted is None:
                raise
            raise exhausted from exc

    def _object_path(self, name: str) -> Path:
        if not name or name.startswith("/") or ".." in name.split("/") or name.startswith("."):
            raise BadObjectName(f"object {name!r}: not a valid object name for a local store")
        return self.root / name

    def _meta_path(self, name: str) -> Path:
        return self.root / META_DIR / f"{name}.json"

    def uri(self, name: str) -> str:
        """The object's URI. Not validated: it also names refused objects in quarantine reports."""
        return f"{self.root.as_uri()}/{name}"

    def put(self, name: str, data: bytes, metadata: dict[str, str] | None = None) -> PutResult:
        """Create-once write. A full filesystem (ENOSPC, EDQUOT) is ``DestinationFull``, no
        memory ``OutOfMemory``: retriable outages that leave nothing behind (no ``.part`` file,
        no sidecar, no notification, no object), so a later put of the same bytes succeeds."""
        target = self._object_path(name)
        crc = crc32c_b64(data)
        tmp = self.root / TMP_DIR / f"{uuid.uuid4().hex}.part"
        try:
            write_atomic(tmp, data, fsync=True)  # durable before it is linked under its name
            with flocked(self.root / ".lock"):
                return self._link(name, target, tmp, data, crc, metadata)
        except (OSError, MemoryError) as exc:
            exhausted = as_exhausted(exc, "destination", str(self.root))
            if exhausted is None:
                raise
            raise exhausted from exc
        finally:
            tmp.unlink(missing_ok=True)

    def _link(
        self, name: str, target: Path, tmp: Path, data: bytes, crc: str, metadata: dict[str, str] | None
    ) -> PutResult:
        """Under the store's lock: the object from its written temp file, with its sidecar and
        its staged notification; whatever was written is removed again if a step fails."""
        if target.exists():
            existing = self.stat(name)
            if existing.size == len(data) and existing.crc32c == crc:
                self._recover()  # its notification, if a failed put left it staged
                return PutResult(existing, created=False)
            raise ObjectConflict(
                f"object {name!r} already exists with different bytes "
                f"(stored crc32c {existing.crc32c}, new {crc})",
                existing,
                crc,
            )
        obj = StoredObject(
            bucket=self.bucket,
            name=name,
            size=len(data),
            crc32c=crc,
            md5_hash="",
            generation=time.time_ns() // 1000,
            time_created=datetime.now(UTC),
            metadata=dict(metadata or {}),
            uri=self.uri(name),
        )
        meta_path = self._meta_path(name)
        staged: Path | None = None
        linked = False
        try:
            staged = self._stage_notification(obj) if self.notify else None
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(meta_path, json.dumps({**object_resource(obj), "uri": obj.uri}).encode(), fsync=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(tmp, target)
            linked = True
        finally:
            if not linked:
                meta_path.unlink(missing_ok=True)
                if staged is not None:
                    staged.unlink(missing_ok=True)
        if staged:
            # Stored: should promoting its notification fail, the retry's "exists" promotes it
            # (``_recover``), as does the next start.
            staged.rename(staged.with_suffix(".json"))
        return PutResult(obj, created=True)

    def stat(self, name: str) -> StoredObject:
        target = self._object_path(name)
        meta = self._meta_path(name)
        if not target.exists() or not meta.exists():
            raise ObjectMissing(f"object {name!r} does not exist in {self.root.as_uri()}")
        data = json.loads(meta.read_text())
        return stored_from_resource(data, data.get("bucket", self.bucket), data.get("uri"))

    def _open(self, name: str) -> BinaryIO:
        # a name that is a prefix of other objects ("raw") is a directory here, no object, as in GCS
        try:
            return self._object_path(name).open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectMissing(f"object {name!r} does not exist in {self.root.as_uri()}") from None

    def read(self, name: str) -> bytes:
        with self._open(name) as f:
            return f.read()

    def read_head(self, name: str, length: int) -> Head:
        obj = self.stat(name)
        with self._open(name) as f:
            return Head(f.read(length), obj.generation, obj.crc32c)

    def delete(self, name: str) -> None:
        """Remove an object, if there (the pipeline deletes only its own canaries)."""
        with flocked(self.root / ".lock"):
            self._object_path(name).unlink(missing_ok=True)
            self._meta_path(name).unlink(missing_ok=True)

    def _stage_notification(self, obj: StoredObject) -> Path:
        event = storage_cloudevent(obj)
        staged = self.root / OUTBOX_DIR / f"{time.time_ns():020d}-{uuid.uuid4().hex}.pending"
        write_atomic(staged, json.dumps(event).encode(), fsync=True)
        return staged

    def _recover(self) -> None:
        """Under the lock, so no put is between staging and promoting: promote staged
        notifications whose object made it; drop those whose write did not; delete the
        temporary files of puts killed before they linked (each a whole object)."""
        cutoff = time.time() - ORPHAN_SECONDS
        for tmp in (self.root / TMP_DIR).iterdir():
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
        for staged in (self.root / OUTBOX_DIR).glob("*.pending"):
            try:
                data = json.loads(staged.read_text())["data"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: left for an operator, never a reason to refuse a put
            try:
                current = self.stat(data["name"])
            except (ObjectMissing, BadObjectName):
                staged.unlink(missing_ok=True)
                continue
            if str(current.generation) == data["generation"]:
                staged.rename(staged.with_suffix(".json"))
            else:
                staged.unlink(missing_ok=True)

    def outbox(self) -> LocalOutbox:
        return LocalOutbox(self.root / OUTBOX_DIR, self.root / DLQ_DIR)


class LocalOutbox:
    """Consumer side of the notification outbox: list, ack (delete), dead-letter with a reason.

    An event file appears whole or not at all (``write_atomic``'s rename, or a staged
    ``.pending`` renamed to ``.json``), so one that is not a JSON object is corrupt, never half
    written: listing moves it to the dead letters with its raw text, and lists the rest."""

    def __init__(self, directory: Path, dlq: Path) -> None:
        self.directory = directory
        self.dlq = dlq

    def pending(
        self, refused: Callable[[Path, str], None] | None = None
    ) -> list[tuple[Path, dict[str, Any]]]:
        """The events, oldest first. An unreadable or non-object one is dead-lettered instead, and
        ``refused(its dead letter, the reason)`` told if this call moved it."""
        out = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue  # acked by a concurrent consumer
            event, why = _parse_event(raw)
            if event is not None:
                out.append((path, event))
                continue
            reason = f"event file {path.name}: {why}"
            target = self.dlq / path.name
            write_atomic(target, _letter(raw, reason, 0), fsync=True)
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # a concurrent listing moved it (and wrote the same dead letter)
            if refused is not None:
                refused(target, reason)
        return out

    def inject(self, event: dict[str, Any]) -> Path:
        """Queue an arbitrary event, as a (possibly buggy) notifier would: fault injection."""
        path = self.directory / f"{time.time_ns():020d}-{uuid.uuid4().hex}.json"
        write_atomic(path, json.dumps(event).encode(), fsync=True)
        return path

    def ack(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def dead_letter(self, path: Path, reason: str, attempts: int) -> Path:
        target = self.dlq / path.name
        write_atomic(target, _letter(path.read_bytes(), reason, attempts), fsync=True)
        path.unlink(missing_ok=True)
        return target


_JSON_TYPES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _parse_event(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The event in an outbox file, or None and why it is none."""
    try:
        event = json.loads(raw)
    except UnicodeDecodeError as exc:
        return None, f"not JSON text ({exc})"
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(event, dict):
        return None, f"not a JSON object (a JSON {_JSON_TYPES.get(type(event), type(event).__name__)})"
    return event, ""


def _letter(raw: bytes, reason: str, attempts: int) -> bytes:
    """A dead letter: the event with ``deadLetter`` added, or, for a file that holds no event
    (no JSON object), its text as ``raw`` (undecodable bytes as backslash escapes)."""
    event, _ = _parse_event(raw)
    letter: dict[str, Any] = event if event is not None else {"raw": raw.decode("utf-8", "backslashreplace")}
    letter["deadLetter"] = {"reason": reason, "attempts": attempts}
    return json.dumps(letter).encode()
