"""What to back up: expand ``SRC`` arguments into (file, name) pairs.

The name (prefix + the file's path relative to its source) is its journal and report key, stable
across reruns. Relative to: a directory itself; a glob's fixed leading directories; an ``@LIST``
file's (one path a line, ``#`` comments) common parent; a plain file has its name only. Hidden
files and directories are skipped: tools' state, not archive.
"""

from __future__ import annotations

import fnmatch
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


def _cannot_list(source: str, exc: OSError, directory: object) -> OSError:
    return OSError(exc.errno, f"backfill source {source}: cannot list {directory}: {exc.strerror}")


def _tree(root: Path, source: str, follow: bool = False) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk without hidden names; a directory it cannot list stops the run naming it (os.walk
    and glob would skip it, and every file below it, silently)."""

    def unlistable(exc: OSError) -> None:
        raise _cannot_list(source, exc, exc.filename)

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable, followlinks=follow):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        yield dirpath, dirnames, sorted(n for n in filenames if not n.startswith("."))


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, _, filenames in _tree(root, str(root)):
        yield from (Path(dirpath) / name for name in filenames)


def _glob_base(pattern: str) -> Path:
    return Path(*itertools.takewhile(lambda part: not glob.has_magic(part), Path(pattern).parts))


def _glob(pattern: str) -> list[Path]:
    """glob.glob(pattern, recursive=True) less hidden names, one part at a time, but a directory
    it cannot list or look into stops the run as a directory source's does."""
    found = [_glob_base(pattern)]
    parts = Path(pattern).parts[len(found[0].parts) :]
    for i, part in enumerate(parts):
        if part == "**":  # each directory and every one below it; and their files, ending the pattern
            found = [
                Path(d) / name
                for top in found
                if top.is_dir()
                for d, _, files in _tree(top, pattern, follow=True)
                for name in ["", *(files if i == len(parts) - 1 else [])]
            ]
        elif glob.has_magic(part):
            found = [
                d / name
                for d in found
                if d.is_dir()
                for _, dirs, files in itertools.islice(_tree(d, pattern), 1)
                for name in dirs + files
                if fnmatch.fnmatchcase(name, part)
            ]
        else:
            found = [d / part for d in found if _exists(d / part, pattern)]
    return found


def _exists(path: Path, pattern: str) -> bool:
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:  # os.path.lexists says False: a directory it cannot look into
        raise _cannot_list(pattern, exc, path.parent) from exc
    return True


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
            for match in sorted(_glob(src), key=str):
                path = match.resolve()
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
