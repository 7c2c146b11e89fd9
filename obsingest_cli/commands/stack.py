"""``obsingest stack``: the real local services (Kafka, Pub/Sub, GCS, PostgreSQL) without Docker."""

from __future__ import annotations

import argparse

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
    up.set_defaults(func=run, action="up")

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
    down.set_defaults(func=run, action="down")

    status = sub.add_parser(
        "status",
        help="health table; exits non-zero if any service is unhealthy",
        description="Probes each service for real: Kafka metadata, GCS bucket list, Pub/Sub "
        "topic list, PostgreSQL SELECT 1.",
    )
    status.add_argument("services", nargs="*", help=_SERVICES_HELP)
    status.set_defaults(func=run, action="status")

    env = sub.add_parser(
        "env",
        help='print the exports clients need: eval "$(obsingest stack env)"',
        description="KAFKA_BOOTSTRAP_SERVERS, PUBSUB_EMULATOR_HOST, STORAGE_EMULATOR_HOST, "
        "OBSINGEST_REGISTRY_URL, PUBSUB_PROJECT_ID, GOOGLE_CLOUD_PROJECT.",
    )
    env.add_argument("services", nargs="*", help=_SERVICES_HELP)
    env.set_defaults(func=run, action="env")

    fetch = sub.add_parser(
        "fetch",
        help="only download/build the pinned artefacts into the cache",
        description="Kafka jars via Maven, fake-gcs-server via go install, the pstest server "
        "via go build. Needs java/mvn/go; a warm cache makes this a no-op.",
    )
    fetch.add_argument("services", nargs="*", help=_SERVICES_HELP)
    fetch.set_defaults(func=run, action="fetch")


def run(args: argparse.Namespace) -> int:
    """One call into ``obsingest_cli.script.stack``: the function named by the subcommand."""
    from obsingest_cli.script import stack

    return int(getattr(stack, args.action)(args))
