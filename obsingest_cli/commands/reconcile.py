"""``obsingest reconcile``: compare the bucket with the registry, register what is missing."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "reconcile",
        help="register stored objects the registry lacks; with --every, run as a service with "
        "a canary, the outbox drain and the redrive",
        description=(
            "List the bucket (by prefix, objects created in the window and older than the "
            "grace), register every object the registry lacks through the register function's "
            "own service (idempotent; bad objects are quarantined with their reason), report "
            "registry rows whose object is gone, and publish ArrivalEvents the outbox still "
            "holds. With --every SECONDS it runs until stopped: each pass also writes a canary "
            "object that must come back as an event (when it does not, notifications are "
            "broken: logged, counted, exit code 2, and on the local stack re-provisioned) and "
            "redrives due dead letters. Exit code: 0 consistent, 1 something could not be "
            "fixed, 2 notifications broken. Settings: OBSINGEST_RECONCILE_*, OBSINGEST_REDRIVE_*, "
            "and the register function's OBSINGEST_STORE_* / _REGISTRY_* / _BUS_*."
        ),
    )
    p.add_argument("--every", type=float, help="run as a service, one pass every SECONDS (default: one pass)")
    p.add_argument(
        "--window",
        type=float,
        help="compare objects created in the last SECONDS (default: OBSINGEST_RECONCILE_WINDOW, 6 h)",
    )
    p.add_argument(
        "--grace", type=float, help="leave objects younger than SECONDS to their notification (default 15)"
    )
    p.add_argument(
        "--prefix",
        action="append",
        dest="prefixes",
        help="prefix to list, repeatable (default: raw/ and quarantine/)",
    )
    p.add_argument("--dry-run", action="store_true", help="one pass that only reports what is missing")
    p.add_argument("--no-canary", dest="canary", action="store_false", help="service without the canary")
    p.add_argument(
        "--no-repair",
        dest="repair",
        action="store_false",
        help="never re-provision topics, subscriptions and notification configs (local stack)",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="print the pass report as JSON")
    p.set_defaults(func=calls("obsingest_cli.script.facility:reconcile", options=True))
