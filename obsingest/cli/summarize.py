"""`obsingest summarize`: per-exposure latency and completeness with the Beam job.

Batch (default) reads archived Avro files; ``--streaming`` runs the live job on Pub/Sub
subscriptions. Everything after ``--`` goes to Beam unchanged (``--runner``, Dataflow or Flink
options), so one command serves the laptop and the cluster.
"""

from __future__ import annotations

import argparse
import os
import sys

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
        "--alerts-output",
        metavar="FILE",
        help="also write budget breaches (OVER_BUDGET/INCOMPLETE) here",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="per-CCD budget in seconds, readout -> published (default 5)",
    )
    stream = parser.add_argument_group("streaming")
    stream.add_argument(
        "--streaming", action="store_true", help="run the streaming job instead of batch"
    )
    stream.add_argument(
        "--project",
        default=os.environ.get("PUBSUB_PROJECT_ID", "obsingest-local"),
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
        "--summaries-topic", default="exposure-summaries", help="topic for summaries ('' for none)"
    )
    stream.add_argument(
        "--alerts-topic", default="budget-alerts", help="topic for budget breaches ('' for none)"
    )
    stream.add_argument(
        "--dead-letter-topic",
        default="exposure-events-dlq",
        help="topic for undecodable input messages, reason in attribute dlq_reason ('' for none)",
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
    stream.add_argument(
        "--run-for", type=float, help="stop the streaming job after this many seconds"
    )
    parser.add_argument(
        "beam_args", nargs=argparse.REMAINDER, help="after '--': options passed to Beam unchanged"
    )
    parser.set_defaults(func=run)


def _path(project: str, kind: str, name: str | None) -> str | None:
    if not name:
        return None
    return name if name.startswith("projects/") else f"projects/{project}/{kind}/{name}"


def run(args: argparse.Namespace) -> int:
    from obsingest import logs

    logs.configure()
    beam_args = [a for a in args.beam_args if a != "--"]
    if args.streaming:
        from beam_jobs.streaming import StreamingSettings, run_streaming

        settings = StreamingSettings(
            arrivals_subscription=_path(args.project, "subscriptions", args.arrivals_subscription),
            manifests_subscription=_path(
                args.project, "subscriptions", args.manifests_subscription
            ),
            summaries_topic=_path(args.project, "topics", args.summaries_topic),
            alerts_topic=_path(args.project, "topics", args.alerts_topic),
            dead_letter_topic=_path(args.project, "topics", args.dead_letter_topic),
            output=args.output,
            alerts_output=args.alerts_output,
            kafka_bootstrap=args.kafka_bootstrap,
            bigquery_table=args.bigquery_table,
            budget=args.budget,
            grace=args.grace,
            allowed_lateness=args.allowed_lateness,
            run_for=args.run_for,
            pipeline_args=beam_args,
        )
        run_streaming(settings)
        return 0
    if not args.arrivals or not args.output:
        print("summarize: batch mode needs --arrivals and --output", file=sys.stderr)
        return 2
    from beam_jobs.report import format_summary_table
    from beam_jobs.summarize import run_batch

    summaries = run_batch(
        args.arrivals,
        args.manifests,
        args.output,
        args.budget,
        beam_args,
        alerts_output=args.alerts_output,
    )
    print(format_summary_table(summaries))
    print(f"{len(summaries)} summaries -> {args.output}")
    return 0
