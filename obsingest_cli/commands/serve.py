"""``obsingest serve``: the presence API (``functions/presence``) on the registry, read-only."""

from __future__ import annotations

import argparse

from obsingest_cli.options import budget_option, registry_option


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "serve",
        help="serve the presence API: is a CCD / an exposure / a night in? (HTTP + JSON)",
        description=(
            "Answer, from the registry and read-only: is this CCD registered (by data id or "
            "dataset id); per exposure expected, registered, missing, readout -> registered "
            "latencies and status against the budget; a night's exposures with their counts. "
            "OpenAPI description at /openapi.json, Prometheus metrics at /metrics. Settings: "
            "OBSINGEST_PRESENCE_* (functions/presence/settings.py), OBSINGEST_REGISTRY_*."
        ),
    )
    registry_option(p)
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8080)")
    p.add_argument("--workers", type=int, help="server processes sharing the port (default 1)")
    budget_option(p, from_settings=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from functions.presence.main import serve

    return serve(args.registry, args.host, args.port, args.budget, args.workers)
