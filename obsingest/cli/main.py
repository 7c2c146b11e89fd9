"""Entry point of the `obsingest` command.

The CLI is the composition root: it is the one place allowed to import the deployment units
(`producers/`, `functions/`, `beam_jobs/`), and it does so lazily inside each subcommand so that
`obsingest --help` stays fast and a unit's heavy dependencies load only when used.

Each subcommand group lives in its own module under `obsingest/cli/` and exposes
``register(subparsers)``; add the module name to ``COMMAND_MODULES`` to wire it in.
"""

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
    "arrivals",
    "assembler",
    "setup",
    "bench",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obsingest",
        description=(
            "Ingest observatory CCD images: compress at the edge, move to the data facility, "
            "register, announce arrivals, and report per-exposure latency against the 5 s budget."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"obsingest.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
