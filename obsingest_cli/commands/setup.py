"""``obsingest setup``: create, idempotently, everything the direct-upload path needs."""

from __future__ import annotations

import argparse

from obsingest import defaults
from obsingest_cli.options import calls, project_option, registry_option


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "setup",
        help="create topics, subscriptions, the bucket and its notification configs (idempotent)",
        description=(
            "Create, if missing: Pub/Sub topics ccd-objects, ccd-objects-dlq, "
            "ccd-objects-dlq-parked, ccd-arrivals, exposures, exposures-dlq, exposures-ingested, "
            "exposure-summaries, budget-alerts, exposure-events-dlq; the relays' pull "
            "subscriptions (with the dead-letter and retry policy of OBSINGEST_RELAY_*) and the "
            "ones keeping dead and parked letters; the bucket; "
            "OBJECT_FINALIZE notification configs for raw/, quarantine/ and canary/ to "
            "ccd-objects; Kafka topic ccd-arrivals when Kafka is a bus backend. Uses "
            "PUBSUB_EMULATOR_HOST / STORAGE_EMULATOR_HOST when set (`obsingest stack env`)."
        ),
    )
    p.add_argument("--bucket", help="bucket name (default: from OBSINGEST_STORE_URL=gs://BUCKET)")
    project_option(p)
    p.add_argument(
        "--prefix",
        action="append",
        dest="prefixes",
        help="notification prefix, repeatable (default: raw/, quarantine/ and canary/)",
    )
    p.add_argument("--subscription", default=defaults.RELAY_SUBSCRIPTION, help="relay subscription name")
    p.add_argument("--kafka", help="Kafka bootstrap servers (default: when OBSINGEST_BUS_BACKEND has kafka)")
    registry_option(
        p,
        help=(
            "a Butler repository (butler:<repo>, default OBSINGEST_REGISTRY_URL when it is one) "
            "to set up as the first registrations would: raw dataset type, run collections, "
            "instruments and detectors; without a bucket only that is done"
        ),
    )
    p.add_argument(
        "--instrument",
        action="append",
        dest="instruments",
        help="instrument to set up in the Butler, repeatable (default: LSSTCam)",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=calls("obsingest_cli.script.setup:run_setup", options=True))
