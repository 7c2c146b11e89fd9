"""`obsingest registry ...`: look into the dataset registry."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls, registry_option


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "registry",
        help="inspect the dataset registry (registered datasets, quarantine)",
        description="Inspect the dataset registry: what was registered, what was refused, why.",
    )
    sub = p.add_subparsers(dest="registry_command", metavar="SUBCOMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    registry_option(common)
    common.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    ls = sub.add_parser(
        "list",
        parents=[common],
        help="list registered datasets",
        description="List registered datasets with their datastore records.",
    )
    ls.add_argument("--instrument", help="only this instrument")
    ls.add_argument("--exposure", type=int, help="only this exposure id")
    ls.set_defaults(func=calls("obsingest_cli.script.registry:list_datasets", options=True))

    q = sub.add_parser(
        "quarantine",
        parents=[common],
        help="list refused inputs and the reasons",
        description="List quarantined inputs: object, reason, message, occurrences.",
    )
    q.set_defaults(func=calls("obsingest_cli.script.registry:list_quarantine", options=True))

    m = sub.add_parser(
        "migrate",
        parents=[common],
        help="create or upgrade the registry schema",
        description="Apply pending schema migrations (idempotent).",
    )
    m.set_defaults(func=calls("obsingest_cli.script.registry:migrate", options=True))

    x = sub.add_parser(
        "export",
        parents=[common],
        help="write the registry as an export `butler import` loads",
        description="Write dimension records, runs, the dataset type and every dataset (same ids, "
        "same URIs) as a Butler export file (needs obsingest[butler]).",
    )
    x.add_argument("--format", dest="fmt", choices=["butler"], default="butler", help="export format")
    x.add_argument(
        "--target",
        choices=["rubin", "daf_butler", "obsingest"],
        default="rubin",
        help=(
            "who reads it: rubin (default; obs_lsst's raw formatters, storage class Exposure: a "
            "science-pipelines environment), daf_butler (a plain daf_butler installation: "
            "records, ids and URIs, no butler.get), obsingest (obsingest's RawFitsFormatter); "
            "see docs/butler.md"
        ),
    )
    x.add_argument(
        "--formatter",
        action="append",
        default=[],
        metavar="INSTRUMENT=CLASS",
        help="the formatter class recorded for an instrument's raws, repeatable",
    )
    x.add_argument("--storage-class", help="storage class of the raw dataset type")
    x.add_argument("path", metavar="file", help="output file, e.g. export.yaml")
    x.set_defaults(func=calls("obsingest_cli.script.registry:export", options=True))
