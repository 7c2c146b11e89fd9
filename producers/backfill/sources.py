"""What to back up: expand ``SRC`` arguments into (file, name) pairs.

The name (prefix + the file's path relative to its source) is its journal and report key, stable
across reruns. Relative to: a directory itself; a glob's fixed leading directories; an ``@LIST``
file's (one path a line, ``#`` comments) common parent; a plain file has its name only. Hidden
files and directories are skipped: tools' state, not archive.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceFile:
    path: Path
    name: str  # journal key: prefix + path relative to its source
    size: int


def _walk(root: Path) -> Iterator[Path]:
    def unlistable(exc: OSError) -> None:  # os.walk would skip it, and its files, silently
        raise OSError(exc.errno, f"backfill source {root}: cannot list {exc.filename}: {exc.strerror}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(dirpath) / name


def _glob_base(pattern: str) -> Path:
    return Path(*itertools.takewhile(lambda part: not glob.has_magic(part), Path(pattern).parts))


def expand_sources(sources: list[str], prefix: str = "") -> list[SourceFile]:
    """Every file the sources name, once (first mention wins), in a stable order."""
    pairs: list[tuple[Path, Path]] = []  # (file, relative name)
    for src in sources:
        if src.startswith("@"):
            listed = [
                Path(line.strip()).resolve()
                for line in Path(src[1:]).read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")
            ]
            base = Path(os.path.commonpath([str(p.parent) for p in listed])) if listed else None
            pairs += [(p, p.relative_to(base)) for p in listed if base is not None]
        elif glob.has_magic(src):
            base = _glob_base(src).resolve()
            for match in sorted(glob.glob(src, recursive=True)):
                path = Path(match).resolve()
                rel = path.relative_to(base)
                if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                    pairs.append((path, rel))
        elif Path(src).is_dir():
            root = Path(src).resolve()
            pairs += [(p, p.relative_to(root)) for p in _walk(root)]
        elif Path(src).is_file():
            path = Path(src).resolve()
            pairs.append((path, Path(path.name)))
        else:
            raise FileNotFoundError(f"backfill source {src!r}: no such file, directory or match")
    out: dict[str, SourceFile] = {}
    for path, rel in pairs:
        name = prefix + rel.as_posix()
        if name not in out:
            out[name] = SourceFile(path, name, _size(path))
    return list(out.values())


def _size(path: Path) -> int:
    """0 for a file that is not there (a dangling link, a listed file moved since): its worker
    fails it with its reason (``source-vanished``) and the others are sent."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
