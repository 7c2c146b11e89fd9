"""``obsingest redrive``: publish dead-lettered notifications back, by hand."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls, project_option


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "redrive",
        help="publish dead-lettered (or parked) notifications back to the objects topic now",
        description=(
            "One redrive pass over the dead-letter hold subscription (ccd-objects-dlq-hold), "
            "or with --parked over the letters the automatic redrive gave up on "
            "(ccd-objects-dlq-parked-hold): every selected letter is published back to "
            "ccd-objects at once, whatever its schedule, with its history in attributes; the "
            "others are left where they are. Prints counts (by reason). The facility service "
            "(`obsingest reconcile --every`) redrives due letters by itself; this is for a "
            "human who fixed the cause. Settings: OBSINGEST_REDRIVE_*, OBSINGEST_BUS_*."
        ),
    )
    p.add_argument(
        "--reason",
        help="only letters whose reason contains TEXT (case-insensitive) or whose HTTP status "
        "is TEXT, e.g. 503, 'registry unavailable', 'no response'",
    )
    p.add_argument("--dry-run", action="store_true", help="count what would be redriven, change nothing")
    p.add_argument("--parked", action="store_true", help="redrive parked letters instead")
    project_option(p)
    p.add_argument("--json", dest="as_json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=calls("obsingest_cli.script.facility:redrive", options=True))
