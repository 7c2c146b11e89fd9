"""`obsingest report`: the night at a glance, from summaries (and arrivals, for per-CCD plots)."""

from __future__ import annotations

import argparse
from pathlib import Path

from obsingest_cli.options import calls


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="print the per-exposure table and write latency plots (PNG)",
        description=(
            "Print a table of ExposureSummaries (newest revision per exposure and every revision "
            "before it) and write PNG plots into --output-dir: p95/max latency per exposure over "
            "the night; with --arrivals also a latency histogram with the budget line and a "
            "focal-plane map of per-detector latency for one exposure (--exposure, default the "
            "one with the worst max latency)."
        ),
    )
    parser.add_argument(
        "--summaries",
        nargs="+",
        required=True,
        metavar="FILE",
        help="ExposureSummary files: JSON lines or .avro (globs ok)",
    )
    parser.add_argument(
        "--arrivals",
        nargs="+",
        default=[],
        metavar="FILE",
        help="ArrivalEvent Avro container files (globs ok) for per-CCD plots",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("report"),
        help="where to write the PNG files (default ./report)",
    )
    parser.add_argument("--exposure", type=int, help="exposure id for the focal-plane map")
    parser.set_defaults(func=calls("obsingest_cli.script.report:run_report", options=True))
