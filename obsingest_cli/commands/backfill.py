"""``obsingest backfill``: bulk, resumable, verified transfer of an archive (producers/backfill)."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls


def register(subparsers: argparse._SubParsersAction) -> None:
    from producers.backfill.main import DESCRIPTION, add_arguments  # standard library only

    parser = subparsers.add_parser(
        "backfill",
        help="upload an archive (tree, glob, list) journalled, verified, resumable",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=calls("producers.backfill.main:run"))
