"""`obsingest demo`: run the whole pipeline end to end on embedded defaults."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from obsingest_cli.options import budget_option, call_with_options, registry_option


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the whole pipeline end to end (DAQ simulator -> store -> registry -> summaries)",
        description=(
            "Simulate exposures, compress and upload every CCD, register each on its finalize "
            "event, announce ArrivalEvents, then compute per-exposure latency and completeness "
            "with the Beam batch job. Embedded defaults: SQLite registry, local-directory store, "
            "in-process bus. Writes registry.sqlite3, store/, arrivals.avro, manifests.avro, "
            "summaries.jsonl and latency.png into --workdir."
        ),
    )
    p.add_argument("--exposures", type=int, default=3, help="exposures to simulate (default 3)")
    p.add_argument("--detectors", type=int, default=9, help="CCDs per exposure (default 9)")
    p.add_argument(
        "--ccd-size",
        choices=["full", "small"],
        default="full",
        help="full: 16 x 2048x576 int32 amplifiers (75.6 MB); small: for quick runs",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("demo-output"),
        help="output directory (default ./demo-output; demo outputs there are replaced)",
    )
    p.add_argument("--instrument", default="LSSTComCam", help="LSSTComCam (default) or LSSTCam")
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="edge worker processes (default: CPU count)"
    )
    p.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="seconds between exposures (the summit runs one every ~17 s; default 0)",
    )
    budget_option(p)
    p.add_argument("--seed", type=int, default=0, help="simulator seed (same seed, same pixels)")
    p.add_argument(
        "--inject-bad",
        action="store_true",
        help="also inject bad inputs and show they are quarantined without loss",
    )
    p.add_argument(
        "--stack",
        choices=["embedded", "local"],
        default="embedded",
        help="embedded: no services (default); local: GCS and Pub/Sub emulators and "
        "PostgreSQL from `obsingest stack up`",
    )
    p.add_argument(
        "--transport",
        choices=["direct", "kafka"],
        default="direct",
        help="direct: upload to the store (default); kafka: chunked Avro over Kafka, "
        "reassembled by the assembler service",
    )
    registry_option(
        p,
        help="registry URL instead of the workdir's SQLite file, e.g. butler:///path/to/repo "
        "to register into a daf_butler repository (obsingest[butler]); embedded stack only",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from obsingest_cli.demo.run import DemoConfig, run_demo

    return run_demo(call_with_options(DemoConfig, args))
