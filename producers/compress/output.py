"""Publishing a compressed file: a reader sees no file or the whole file, never a torn one.

Unlike ``obsingest.fileio.write_atomic``, the temp file can be checked before the rename (``-D``/
``-F`` compare the decoded output with the input before anything is deleted), ``durable`` fsyncs
file and directory so a crash cannot lose both input and output, and no ``tempfile`` import.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable
from pathlib import Path

_serial = itertools.count()


def publish(
    target: Path,
    parts: Iterable[bytes],
    *,
    durable: bool = False,
    check: Callable[[Path], None] | None = None,
) -> int:
    """Write ``parts`` to ``target`` through a checked temp file; returns the bytes written. An
    existing ``target`` is replaced (fpack's preflight refuses to clobber before); on any failure
    the temp file is removed and ``target`` is untouched."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{next(_serial)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.writelines(parts)
            size = fh.tell()
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        sync_directory(target.parent)
    return size


def sync_directory(path: Path) -> None:
    """fsync a directory, so that a rename or unlink in it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
