"""A command that meets an exhausted resource stops with one line naming it and its path, exit
75 (EX_TEMPFAIL), no traceback; a named error exits 1; a bug keeps its traceback (issue 21)."""

from __future__ import annotations

import argparse
import errno

import pytest

from obsingest.errors import CorruptFile, RegistryFull
from obsingest_cli import main as cli

pytestmark = pytest.mark.unit


def run_failing(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> int:
    """``obsingest status`` whose body raises ``error``."""

    def parser(names: tuple[str, ...] = cli.COMMAND_MODULES) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog="obsingest")
        sub = p.add_subparsers(dest="command")

        def fail(args: argparse.Namespace) -> int:
            raise error

        sub.add_parser("status").set_defaults(func=fail)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    return cli.main(["status"])


def test_a_full_disk_is_one_line_and_exit_75(monkeypatch, capsys) -> None:
    error = OSError(errno.ENOSPC, "No space left on device", "/data/demo/arrivals.avro")
    assert run_failing(monkeypatch, error) == cli.EX_TEMPFAIL == 75
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "obsingest status: resource exhausted: disk /data/demo/arrivals.avro: no space left "
        "(No space left on device)"
    ]
    assert "Traceback" not in err


def test_a_classified_exhaustion_keeps_its_resource_and_path(monkeypatch, capsys) -> None:
    error = RegistryFull("registry postgresql://u@db/r: no space left", "registry", "db")
    assert run_failing(monkeypatch, error) == 75
    assert "registry postgresql://u@db/r: no space left" in capsys.readouterr().err


def test_memory_is_exhaustion_too(monkeypatch, capsys) -> None:
    assert run_failing(monkeypatch, MemoryError()) == 75
    assert "resource exhausted: memory" in capsys.readouterr().err


def test_a_named_error_exits_1_and_a_bug_keeps_its_traceback(monkeypatch, capsys) -> None:
    assert run_failing(monkeypatch, CorruptFile("truncated")) == 1
    assert "error (corrupt-file): truncated" in capsys.readouterr().err
    with pytest.raises(ZeroDivisionError):
        run_failing(monkeypatch, ZeroDivisionError("a bug"))
