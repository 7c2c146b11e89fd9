"""``obsingest edge``: the edge service (producers/edge): hand-off directory -> journal -> send;
``obsingest edge release``: quarantined CCDs back into the hand-off directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from obsingest_cli.options import calls


def register(subparsers: argparse._SubParsersAction) -> None:
    from producers.edge.main import DESCRIPTION, add_arguments  # standard library only

    parser = subparsers.add_parser(
        "edge",
        help="run the edge service: watch the DAQ's hand-off directory, journal, send",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=calls("producers.edge.main:run"))
    actions = parser.add_subparsers(dest="edge_action", metavar="ACTION")
    release = actions.add_parser(
        "release",
        help="put CCDs quarantined for a reason that was not theirs back into the hand-off",
        description="Move CCDs under HANDOFF/quarantine/ whose .reason.json names one of the "
        "reasons (default unexpected-error) back into the hand-off directory, with their "
        "sidecars, and set their journal entries back to seen: the edge sends them again.",
    )
    release.add_argument("--handoff", type=Path, required=True, metavar="DIR")
    release.add_argument(
        "--spool", type=Path, required=True, metavar="DIR", help="the edge's spool (journal)"
    )
    release.add_argument(
        "--reason",
        action="append",
        metavar="REASON",
        help="quarantine reason to release (repeatable; default unexpected-error)",
    )
    release.add_argument("--dry-run", action="store_true", help="list, change nothing")
    release.set_defaults(func=run_release)


def run_release(args: argparse.Namespace) -> int:
    from producers.edge.release import DEFAULT_REASONS, release_quarantined

    done = release_quarantined(args.handoff, args.spool, args.reason or DEFAULT_REASONS, dry_run=args.dry_run)
    for item in done:
        why = f" ({item.why})" if item.why else ""
        print(f"{item.status}: {item.key or '-'} {item.path} [{item.reason}]{why}")
    released = sum(1 for i in done if i.status in ("released", "would-release"))
    verb = "to release" if args.dry_run else "released"
    print(f"{released} of {len(done)} quarantined CCD(s) {verb}")
    return 0 if released == len(done) else 1
