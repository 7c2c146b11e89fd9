"""``obsingest stack``: the real local services (Kafka, Pub/Sub, GCS, PostgreSQL) without Docker."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obsingest.stack import Stack

_SERVICES_HELP = "limit to these services (default: all of kafka, pubsub, gcs, postgres)"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``stack`` and its subcommands to the top-level parser."""
    parser = subparsers.add_parser(
        "stack",
        help="run the local service stack (Kafka, Pub/Sub, GCS, PostgreSQL) as native processes",
        description=(
            "Start, stop and inspect real local services as native processes: Kafka (KRaft, "
            "Maven Central jars), Pub/Sub (pstest), GCS (fake-gcs-server) and PostgreSQL "
            "(Debian). Artefacts are fetched once into .cache/; pids, logs and data live in "
            ".run/stack/. Ports and directories: OBSINGEST_STACK_* environment variables."
        ),
    )
    sub = parser.add_subparsers(dest="stack_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda _args: (parser.print_help(), 2)[1])

    up = sub.add_parser(
        "up",
        help="fetch artefacts, start what is not running, wait until all are healthy",
        description="Idempotent: services already running are left alone. Fails with the "
        "service's log tail if one does not become healthy.",
    )
    up.add_argument("services", nargs="*", help=_SERVICES_HELP)
    up.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for each service (default: OBSINGEST_STACK_STARTUP_TIMEOUT, 60)",
    )
    up.set_defaults(func=cmd_up)

    down = sub.add_parser(
        "down",
        help="stop exactly the processes `up` started (by recorded pid)",
        description="Stops each service's whole process group; nothing is left running.",
    )
    down.add_argument("services", nargs="*", help=_SERVICES_HELP)
    down.add_argument(
        "--purge",
        action="store_true",
        help="also delete the services' data (Kafka logs, PostgreSQL cluster, GCS objects)",
    )
    down.set_defaults(func=cmd_down)

    status = sub.add_parser(
        "status",
        help="health table; exits non-zero if any service is unhealthy",
        description="Probes each service for real: Kafka metadata, GCS bucket list, Pub/Sub "
        "topic list, PostgreSQL SELECT 1.",
    )
    status.add_argument("services", nargs="*", help=_SERVICES_HELP)
    status.set_defaults(func=cmd_status)

    env = sub.add_parser(
        "env",
        help='print the exports clients need: eval "$(obsingest stack env)"',
        description="KAFKA_BOOTSTRAP_SERVERS, PUBSUB_EMULATOR_HOST, STORAGE_EMULATOR_HOST, "
        "OBSINGEST_REGISTRY_URL, PUBSUB_PROJECT_ID, GOOGLE_CLOUD_PROJECT.",
    )
    env.add_argument("services", nargs="*", help=_SERVICES_HELP)
    env.set_defaults(func=cmd_env)

    fetch = sub.add_parser(
        "fetch",
        help="only download/build the pinned artefacts into the cache",
        description="Kafka jars via Maven, fake-gcs-server via go install, the pstest server "
        "via go build. Needs java/mvn/go; a warm cache makes this a no-op.",
    )
    fetch.add_argument("services", nargs="*", help=_SERVICES_HELP)
    fetch.set_defaults(func=cmd_fetch)


def _stack(args: argparse.Namespace) -> Stack:
    from obsingest.stack import Stack

    return Stack(only=list(args.services) or None)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def cmd_up(args: argparse.Namespace) -> int:
    from obsingest.stack import StackError, render_status_table

    t0 = time.monotonic()
    stack = _stack(args)
    try:
        result = stack.up(timeout=args.timeout)
    except StackError as exc:
        return _fail(exc)
    took = time.monotonic() - t0
    started = ", ".join(result.started) or "none"
    print(f"started: {started}; already running: {', '.join(result.already_running) or 'none'}"
          f" ({took:.1f} s)")  # fmt: skip
    rows = stack.status()
    print(render_status_table(rows), end="")
    return 0 if all(r.healthy for r in rows) else 1


def cmd_down(args: argparse.Namespace) -> int:
    stack = _stack(args)
    stopped = stack.down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from obsingest.stack import render_status_table

    rows = _stack(args).status()
    print(render_status_table(rows), end="")
    return 0 if all(r.healthy for r in rows) else 1


def cmd_env(args: argparse.Namespace) -> int:
    from obsingest.stack import render_exports

    print(render_exports(_stack(args).env()), end="")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from obsingest.stack import StackError

    try:
        _stack(args).fetch()
    except StackError as exc:
        return _fail(exc)
    print("artefacts are in the cache")
    return 0
