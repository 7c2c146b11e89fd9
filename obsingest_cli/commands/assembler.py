"""``obsingest assembler``: run one Kafka chunk assembler until stopped (functions/assembler)."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from functions.assembler.main import add_arguments

    p = subparsers.add_parser(
        "assembler",
        help="run the Kafka chunk assembler (CcdChunk records -> files in the object store)",
        description=(
            "Consume CcdChunk records, reassemble and verify each CCD, store it create-once, "
            "dead-letter poison records with the reason, then commit offsets. Every option "
            "defaults to its OBSINGEST_ASSEMBLER_* environment variable (see "
            "functions/assembler/README.md)."
        ),
    )
    add_arguments(p)
    p.set_defaults(func=calls("functions.assembler.main:run"))
