"""``obsingest status``: the night at a glance, live in the terminal or once for scripts."""

from __future__ import annotations

import argparse

from obsingest_cli.options import budget_option, calls, registry_option


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "status",
        help="live view of the night: exposures against the budget, quarantine, dead letters",
        description=(
            "A live terminal view of the night from the registry (read-only): the newest "
            "exposures with completeness, p50/p95/max readout -> registered latency against the "
            "budget and status, and what was quarantined; with --metrics, what each running "
            "process's /metrics says (dead-lettered, waiting, spooled at the edge, consumer lag). "
            "--once prints it and exits: 0 the last exposure made the budget, 1 it did not, "
            "2 no exposure to judge (or the registry cannot be read)."
        ),
    )
    registry_option(p)
    p.add_argument(
        "--metrics",
        nargs="+",
        default=[],
        metavar="URL",
        help="Prometheus endpoints of running processes, e.g. http://127.0.0.1:8000/metrics",
    )
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument(
        "--json", dest="as_json_output", action="store_true", help="with --once: the snapshot as JSON"
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.add_argument("--exposures", type=int, default=10, help="newest exposures shown (10)")
    p.add_argument("--since-hours", type=float, default=24.0, help="quarantine window, hours (24)")
    budget_option(p, from_settings=True)
    p.set_defaults(func=calls("obsingest_cli.script.status_view:run_status", options=True))
