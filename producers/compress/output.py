"""Publishing a compressed file: a reader sees no file or the whole file, never a torn one.

The bytes go to a temporary file beside the target, are optionally checked there (``check``:
the fpack-compatible ``-D``/``-F`` decode the written file and compare it with the input before
anything is deleted or overwritten) and made durable (``durable``: fsync of the file before the
rename and of the directory after it, so a crash cannot lose both the input and the output),
then renamed into place. Unlike ``obsingest.fileio.write_atomic`` it can run that check between
the write and the rename, and it needs no ``tempfile`` import (start-up time of the command).
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
    """Write ``parts`` to ``target`` through a checked temp file; returns the bytes written.

    An existing ``target`` is replaced (callers that must not clobber check first, as fpack's
    preflight does). On any failure the temp file is removed and ``target`` is untouched.
    """
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{next(_serial)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)
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
