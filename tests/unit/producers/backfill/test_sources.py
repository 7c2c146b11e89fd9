"""Backfill sources: trees, globs and lists become (file, object name) pairs, once each."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from producers.backfill.run import BackfillReport
from producers.backfill.sources import expand_sources
from producers.backfill.transfer import split_destination

pytestmark = pytest.mark.unit


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in ("a/1.fz", "a/b/2.fz", "a/b/3.txt", "a/.hidden/4.fz", "a/.5.fz", "c.fz"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rel.encode())
    return tmp_path


def test_a_directory_tree_skips_hidden_files(tree: Path) -> None:
    got = expand_sources([str(tree / "a")], "archive/")
    assert [f.name for f in got] == ["archive/1.fz", "archive/b/2.fz", "archive/b/3.txt"]
    assert got[0].size == len(b"a/1.fz") and got[0].path == tree / "a" / "1.fz"


def test_a_glob_names_objects_below_its_fixed_part(tree: Path) -> None:
    got = expand_sources([str(tree / "a" / "**" / "*.fz")])
    assert sorted(f.name for f in got) == ["1.fz", "b/2.fz"]


def test_a_list_file_and_duplicates(tree: Path) -> None:
    listing = tree / "list.txt"
    listing.write_text(f"# archive\n{tree / 'a/1.fz'}\n\n{tree / 'a/b/2.fz'}\n")
    got = expand_sources([f"@{listing}", str(tree / "a" / "1.fz")], "p/")
    assert [f.name for f in got] == ["p/1.fz", "p/b/2.fz"]  # the single file is the same name


def test_a_missing_source_is_an_error_naming_it(tree: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        expand_sources([str(tree / "nope")])


def test_destinations() -> None:
    assert split_destination("gs://b/x/y/") == ("gs://b", "x/y/")
    assert split_destination("gs://b") == ("gs://b", "")
    assert split_destination("file:///tmp/s") == ("file:///tmp/s", "")
    with pytest.raises(ValueError, match="unsupported"):
        split_destination("s3://b")


def test_the_report_table_and_rates() -> None:
    report = BackfillReport(
        files=10,
        already_done=2,
        stored=6,
        exists=1,
        bytes=8_000_000,
        seconds=2.0,
        failed={"x": "source-vanished: gone"},
    )
    assert report.verified == 7 and report.files_s == 3.5 and report.gbit_s == 0.032
    table = report.table()
    assert "failed: source-vanished" in table and "Gbit/s" in table
    assert "x: source-vanished" in table


def test_a_dangling_link_or_a_listed_file_gone_fails_alone(tree: Path) -> None:
    """One dangling symlink in a tree, or one file of an @LIST moved since, stopped the whole
    backfill before it began (exit 2): it is a file like the others, failed by its worker with
    its reason (source-vanished) while the rest are sent."""
    (tree / "a" / "b" / "gone.fz").symlink_to(tree / "nowhere.fz")
    got = expand_sources([str(tree / "a")])
    assert [f.name for f in got] == ["1.fz", "b/2.fz", "b/3.txt", "b/gone.fz"]
    assert got[-1].size == 0
    listing = tree / "list.txt"
    listing.write_text(f"{tree / 'a/1.fz'}\n{tree / 'a/moved.fz'}\n")
    assert [f.name for f in expand_sources([f"@{listing}"])] == ["1.fz", "moved.fz"]


def test_a_directory_that_cannot_be_listed_is_an_error_naming_it(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.walk skips a directory it cannot list (permission denied, an I/O error) without a word:
    every file below it was left out, and the backfill said every file was in (exit 0)."""
    import os

    scandir = os.scandir

    def refusing(path: Any) -> Any:
        if str(path).endswith("/b"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    with pytest.raises(OSError, match=r"a/b.*Permission denied"):
        expand_sources([str(tree / "a")])


@pytest.fixture
def locked_tree() -> Iterator[Path]:
    """top/a/{1.fz, ok/3.fz, locked/{2.fz, sub/4.fz}} with locked mode 000, in a directory anyone
    may enter (a test's tmp_path is below one only its owner may)."""
    top = Path(tempfile.mkdtemp(prefix="backfill-locked-"))
    try:
        top.chmod(0o755)
        for rel in ("a/1.fz", "a/ok/3.fz", "a/locked/2.fz", "a/locked/sub/4.fz"):
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_bytes(b"x")
        (top / "a" / "locked").chmod(0)
        yield top
    finally:
        if (top / "a" / "locked").exists():
            (top / "a" / "locked").chmod(0o755)
        shutil.rmtree(top)


def _error_as_nobody(sources: list[str]) -> str:
    """expand_sources' OSError ('' for none), as a user the directory's mode refuses: root may list
    any directory, so as root it runs in a child that gives root up."""
    if os.geteuid() != 0:
        try:
            expand_sources(sources)
        except OSError as exc:
            return str(exc)
        return ""
    read, write = os.pipe()
    if (pid := os.fork()) == 0:  # pragma: no cover (the child)
        message = "no error"
        try:
            os.setgid(65534)
            os.setuid(65534)
            expand_sources(sources)
            message = ""
        except OSError as exc:
            message = str(exc)
        finally:
            os.write(write, message.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    return message


@pytest.mark.parametrize("pattern", ["a", "a/**/*.fz", "a/*/*.fz", "*/locked/*.fz", "*/locked/sub/*.fz"])
def test_a_glob_below_a_directory_it_cannot_list_is_an_error_naming_it(
    locked_tree: Path, pattern: str
) -> None:
    """glob skips a directory it cannot list or look into (permission denied) without a word,
    as os.walk did: the files below it were never sent, and the backfill exited 0. A glob now
    stops the run naming the directory (exit 2), as a directory source does."""
    error = _error_as_nobody([str(locked_tree / pattern)])
    assert f"cannot list {locked_tree / 'a' / 'locked'}" in error and "Permission denied" in error
    assert _error_as_nobody([str(locked_tree / "a" / "ok" / "*.fz")]) == ""  # only what it must list
