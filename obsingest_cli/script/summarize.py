"""``obsingest summarize``'s work: Beam options and settings from the command line, then the
batch or the streaming job (``beam_jobs``)."""

from __future__ import annotations

import argparse
import sys


def _path(project: str, kind: str, name: str | None) -> str | None:
    if not name:
        return None
    return name if name.startswith("projects/") else f"projects/{project}/{kind}/{name}"


def run_summarize(args: argparse.Namespace) -> int:
    """Batch (archived Avro -> summaries file) or streaming (Pub/Sub -> topics), per ``args``."""
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
