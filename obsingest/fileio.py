"""Atomic file writes (a reader sees the old file or the whole new one, never a torn one) and
the exclusive ``flock`` that serialises writers across processes."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any


def write_atomic(path: Path, data: bytes | Iterable[bytes], fsync: bool = False) -> Path:
    """Write ``data`` (bytes or an iterable of chunks) to a temp file beside ``path``, then
    rename it over ``path``. ``fsync`` makes it durable before the rename (crash-safe)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                fh.writelines(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@contextmanager
def flocked(file: IO[Any] | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on an open file, or on the file at a path (created if absent)."""
    with open(file, "a") if isinstance(file, Path) else nullcontext(file) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
