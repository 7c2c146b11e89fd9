"""``obsingest stack``: the real local services (Kafka, Pub/Sub, GCS, PostgreSQL) without Docker."""

from __future__ import annotations

import argparse

from obsingest_cli.options import calls

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
    for action, help_, description in _SUBCOMMANDS:
        cmd = sub.add_parser(action, help=help_, description=description)
        cmd.add_argument("services", nargs="*", help=_SERVICES_HELP)
        cmd.set_defaults(func=calls(f"obsingest_cli.script.stack:{action}"))
        if action == "up":
            cmd.add_argument(
                "--timeout",
                type=float,
                help="seconds to wait for each service (default: OBSINGEST_STACK_STARTUP_TIMEOUT, 60)",
            )
        elif action == "down":
            cmd.add_argument(
                "--purge",
                action="store_true",
                help="also delete the services' data (Kafka logs, PostgreSQL cluster, GCS objects)",
            )


_SUBCOMMANDS = (
    (
        "up",
        "fetch artefacts, start what is not running, wait until all are healthy",
        "Idempotent: services already running are left alone. Fails with the service's log tail "
        "if one does not become healthy.",
    ),
    (
        "down",
        "stop exactly the processes `up` started (by recorded pid)",
        "Stops each service's whole process group; nothing is left running.",
    ),
    (
        "status",
        "health table; exits non-zero if any service is unhealthy",
        "Probes each service for real: Kafka metadata, GCS bucket list, Pub/Sub topic list, "
        "PostgreSQL SELECT 1.",
    ),
    (
        "env",
        'print the exports clients need: eval "$(obsingest stack env)"',
        "KAFKA_BOOTSTRAP_SERVERS, PUBSUB_EMULATOR_HOST, STORAGE_EMULATOR_HOST, "
        "OBSINGEST_REGISTRY_URL, PUBSUB_PROJECT_ID, GOOGLE_CLOUD_PROJECT.",
    ),
    (
        "fetch",
        "only download/build the pinned artefacts into the cache",
        "Kafka jars via Maven, fake-gcs-server via go install, the pstest server via go build. "
        "Needs java/mvn/go; a warm cache makes this a no-op.",
    ),
)
