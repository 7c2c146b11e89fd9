"""``obsingest edge``: the edge service (producers/edge): hand-off directory -> journal -> send."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from producers.edge.main import DESCRIPTION, add_arguments  # standard library only

    parser = subparsers.add_parser(
        "edge", help="run the edge service: watch the DAQ's hand-off directory, journal, send",
        description=DESCRIPTION,
    )  # fmt: skip
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from producers.edge.main import run as run_edge

    return run_edge(args)
