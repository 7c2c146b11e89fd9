"""`obsingest summarize`: per-exposure summaries with the Beam job, batch or streaming; what
follows ``--`` goes to Beam unchanged, so one command serves the laptop and the cluster."""

from __future__ import annotations

import argparse
import os

from obsingest import defaults
from obsingest_cli.options import budget_option, calls

DESCRIPTION = (
    "Compute one ExposureSummary per exposure (expected, arrived, completeness, latency "
    "p50/p95/max readout->published, CCDs over budget, missing detectors, status) with the Apache "
    "Beam job. Batch (default): from ArrivalEvent and ExposureManifest Avro files to JSON lines "
    "(or Avro when --output ends in .avro). --streaming: live from Pub/Sub subscriptions to the "
    "exposure-summaries topic. Beam options go after '--', e.g. "
    "'-- --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp'."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "summarize",
        help="per-exposure latency/completeness summaries with the Beam job (batch or streaming)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--arrivals",
        nargs="+",
        default=[],
        metavar="FILE",
        help="ArrivalEvent Avro container files or globs (batch)",
    )
    parser.add_argument(
        "--manifests",
        nargs="+",
        default=[],
        metavar="FILE",
        help="ExposureManifest Avro container files or globs (batch)",
    )
    parser.add_argument(
        "--output", metavar="FILE", help="summaries file: JSON lines, or Avro if it ends in .avro"
    )
    parser.add_argument(
        "--alerts-output", metavar="FILE", help="also write budget breaches (OVER_BUDGET/INCOMPLETE) here"
    )
    parser.add_argument(
        "--dead-letter-output",
        metavar="FILE",
        help="a JSON line per bad input file, block or record, naming it and why "
        "(default OUTPUT.dead-letter.jsonl; empty when nothing was bad)",
    )
    budget_option(parser, "per-CCD budget in seconds, readout -> published (default %(default)s)")
    stream = parser.add_argument_group("streaming")
    stream.add_argument("--streaming", action="store_true", help="run the streaming job instead of batch")
    stream.add_argument(
        "--project",
        default=os.environ.get("PUBSUB_PROJECT_ID", defaults.LOCAL_PROJECT),
        help="Pub/Sub project for short names (default $PUBSUB_PROJECT_ID or obsingest-local)",
    )
    stream.add_argument(
        "--arrivals-subscription",
        default="ccd-arrivals-beam",
        help="subscription on ccd-arrivals (short name or full path)",
    )
    stream.add_argument(
        "--manifests-subscription",
        default="exposures-beam",
        help="subscription on exposures (short name or full path)",
    )
    stream.add_argument(
        "--summaries-topic", default=defaults.SUMMARIES_TOPIC, help="topic for summaries ('' for none)"
    )
    stream.add_argument(
        "--alerts-topic", default=defaults.ALERTS_TOPIC, help="topic for budget breaches ('' for none)"
    )
    stream.add_argument(
        "--dead-letter-topic",
        default=defaults.EVENTS_DLQ_TOPIC,
        help="topic for undecodable and late input messages, reason in attribute dlq_reason ('' for none)",
    )
    stream.add_argument("--kafka-bootstrap", help="also read from Kafka (needs Java expansion)")
    stream.add_argument("--bigquery-table", help="also write summaries to PROJECT:DATASET.TABLE")
    stream.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="seconds after first readout + budget before forcing a summary",
    )
    stream.add_argument(
        "--allowed-lateness",
        type=float,
        default=600.0,
        help="seconds after the deadline that late arrivals revise a summary",
    )
    stream.add_argument("--run-for", type=float, help="stop the streaming job after this many seconds")
    parser.add_argument(
        "beam_args", nargs=argparse.REMAINDER, help="after '--': options passed to Beam unchanged"
    )
    parser.set_defaults(func=calls("obsingest_cli.script.summarize:run_summarize"))
