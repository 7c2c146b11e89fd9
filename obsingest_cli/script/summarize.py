"""``obsingest summarize``'s work: Beam options and settings from the command line, then the
batch or the streaming job (``beam_jobs``)."""

from __future__ import annotations

import argparse
import sys

from obsingest_cli.options import call_with_options


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

        paths = {
            name: _path(args.project, kind, getattr(args, name))
            for name, kind in (
                ("arrivals_subscription", "subscriptions"),
                ("manifests_subscription", "subscriptions"),
                ("summaries_topic", "topics"),
                ("alerts_topic", "topics"),
                ("dead_letter_topic", "topics"),
            )
        }
        settings = call_with_options(StreamingSettings, args, **paths, pipeline_args=beam_args)
        run_streaming(settings)
        return 0
    if not args.arrivals or not args.output:
        print("summarize: batch mode needs --arrivals and --output", file=sys.stderr)
        return 2
    from apache_beam.io.filesystems import FileSystems

    from beam_jobs.report import format_summary_table
    from beam_jobs.summarize import dead_letter_path, run_batch

    summaries = call_with_options(run_batch, args, pipeline_args=beam_args)
    print(format_summary_table(summaries))
    print(f"{len(summaries)} summaries -> {args.output}")
    dead = dead_letter_path(args.output, args.dead_letter_output)
    with FileSystems.open(dead) as fh:
        bad = fh.read().count(b"\n")
    if bad:
        print(f"{bad} bad inputs skipped -> {dead}")
    return 0
