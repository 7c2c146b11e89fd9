"""``obsingest arrivals tail``: print ArrivalEvents from Pub/Sub ``ccd-arrivals`` as they come
(work in ``obsingest_cli.script.arrivals``)."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls, project_option


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "arrivals",
        help="follow ArrivalEvents on Pub/Sub",
        description="Follow the ArrivalEvents the register function publishes to ccd-arrivals.",
    )
    sub = p.add_subparsers(dest="arrivals_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda _args: (p.print_help(), 2)[1])
    t = sub.add_parser(
        "tail",
        help="print arrivals as they come, one line per CCD (deduplicated on dataset id)",
        description=(
            "Subscribe to ccd-arrivals (creating the subscription if absent) and print each "
            "new CCD: data id, dataset id, latency readout -> published, per-stage deltas."
        ),
    )
    t.add_argument("--subscription", default="ccd-arrivals-tail", help="subscription to use")
    project_option(t)
    t.add_argument("--json", dest="as_json_lines", action="store_true", help="JSON lines instead of text")
    t.add_argument("--limit", type=int, default=0, help="exit after N unique arrivals")
    t.set_defaults(func=calls("obsingest_cli.script.arrivals:run_tail", options=True))
