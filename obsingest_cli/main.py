"""Entry point of the ``obsingest`` command: a module under ``commands/`` exposes
``register(subparsers)`` and is wired in by its name in ``COMMAND_MODULES``."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "registry",
    "compress",
    "daq",
    "edge",
    "backfill",
    "stack",
    "summarize",
    "report",
    "relay",
    "redrive",
    "reconcile",
    "arrivals",
    "assembler",
    "setup",
    "bench",
    "serve",
    "status",
)


def build_parser(names: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser with the subcommands of ``names`` (every one by default)."""
    parser = argparse.ArgumentParser(
        prog="obsingest",
        description=(
            "Ingest observatory CCD images: compress at the edge, move to the data facility, "
            "register, announce arrivals, and report per-exposure latency against the 5 s budget."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in names:
        importlib.import_module(f"obsingest_cli.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command, building only its parser: ``compress`` (an fpack drop-in) should not
    pay for importing every other command."""
    argv = sys.argv[1:] if argv is None else argv
    only = (argv[0],) if argv and argv[0] in COMMAND_MODULES else COMMAND_MODULES
    parser = build_parser(only)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except Exception as exc:
        code = _failed(args.command, exc)
        if code is None:
            raise  # a bug: the traceback is what its report needs
        return code


#: a resource ran out (disk, quota, rate, connection slots, memory): try again later (sysexits.h)
EX_TEMPFAIL = 75


def _failed(command: str, exc: Exception) -> int | None:
    """One line instead of a traceback: an exhausted resource (exit 75, as ``obsingest edge``)
    or an ObsIngestError (exit 1); None for anything else."""
    from obsingest.errors import ObsIngestError
    from obsingest.exhaustion import one_line

    line = one_line(exc)
    if line is not None:
        print(f"obsingest {command}: resource exhausted: {line}", file=sys.stderr)
        return EX_TEMPFAIL
    if isinstance(exc, ObsIngestError):
        print(f"obsingest {command}: error ({exc.reason}): {exc}", file=sys.stderr)
        return 1
    return None


if __name__ == "__main__":
    sys.exit(main())
