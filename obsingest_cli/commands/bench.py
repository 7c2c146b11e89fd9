"""``obsingest bench transfer``: the observatory transfer test, on our transports.

Every interval the harness, as the DAQ, hands an exposure's N CCD files to the edge service's
warm workers, which compress (``--compress``) and send them to ``file://``, ``gs://`` or
``kafka://``. Prints the observatory report's table (CCDs, min/mean/max seconds, Mbit/s).
``--end-to-end`` also runs the facility side and waits for every ArrivalEvent: readout ->
announced, per stage. The work is in ``obsingest_cli.script.bench_transfer``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from obsingest_cli.options import budget_option, calls

DESCRIPTION = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "bench", help="benchmarks: the transfer harness, the capacity model", description=DESCRIPTION
    )
    sub = parser.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda _args: (parser.print_help(), 2)[1])
    p = sub.add_parser(
        "transfer",
        help="N CCDs per exposure, in step, to file://, gs:// or kafka://; the report's table",
        description=DESCRIPTION,
    )
    p.add_argument(
        "--destination",
        required=True,
        metavar="URL",
        help="file://DIR, gs://BUCKET[/PREFIX] (GCS emulator via STORAGE_EMULATOR_HOST) or "
        "kafka://[HOST:PORT/]TOPIC (broker from KAFKA_BOOTSTRAP_SERVERS by default)",
    )
    p.add_argument("--ccds", type=int, default=1, help="CCDs per exposure")
    p.add_argument(
        "--workers", type=int, help="edge worker processes (default: one per core, at most one per CCD)"
    )
    p.add_argument("--numexp", type=int, default=3, help="exposures (the first is warm-up)")
    p.add_argument("--interval", type=float, default=17.0, help="seconds between readouts")
    p.add_argument(
        "--compress",
        action="store_true",
        help="read the raw CCD and compress it in the loop (else send the pre-compressed file)",
    )
    p.add_argument(
        "--starttime",
        metavar="ISO",
        help="first readout (UTC if no zone); default: a few seconds after all workers are warm",
    )
    p.add_argument(
        "--end-to-end",
        action="store_true",
        help="also run the facility side and wait for each CCD's ArrivalEvent "
        "(readout -> announced). file://DIR then holds the embedded store and registry; gs:// "
        "and kafka:// get the demo environment's fresh per-run bucket / topic instead",
    )
    p.add_argument(
        "--stack",
        choices=["embedded", "local"],
        help="end-to-end environment (default: embedded for file://, local for gs:// and kafka://)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="write the full result as JSON")
    p.add_argument("--ccd-size", choices=["full", "small"], default="full")
    p.add_argument(
        "--run-dir",
        type=Path,
        default=Path(".run/bench/transfer"),
        help="CCD file cache and JSON-lines transfer logs (default .run/bench/transfer)",
    )
    p.add_argument("--threads", type=int, help="compression threads per worker")
    budget_option(p)
    p.add_argument("--arrival-timeout", type=float, default=60.0, help="seconds to wait for announcements")
    p.set_defaults(func=calls("obsingest_cli.script.bench_transfer:run_transfer"))
    c = sub.add_parser(
        "capacity",
        help="per-stage CPU and bytes per CCD measured here -> what a whole camera needs",
        description="Calibrate the capacity model with two short end-to-end runs of the "
        "pipeline on the local stack (1 CCD and N CCDs per exposure: CPU by role, bytes, "
        "latency of a lone CCD), print the predicted max readout -> announced on this machine "
        "and, for a camera and a cadence, the edge cores and nodes, register function "
        "instances and bandwidth needed to hold the per-CCD budget and the whole-exposure "
        "target. The model and its queueing assumptions: producers/transfer/capacity.py.",
    )
    c.add_argument(
        "--camera", default="LSSTCam", help="LSSTCam (205 detectors), LSSTComCam (9), LATISS (1) or a number"
    )
    c.add_argument("--cadence", type=float, default=17.0, help="seconds between exposures")
    budget_option(c, "seconds, readout -> announced, every CCD (default %(default)s)")
    c.add_argument(
        "--target",
        type=float,
        default=7.0,
        help="seconds, readout -> whole exposure at the facility (default 7)",
    )
    c.add_argument("--path", choices=["direct", "kafka"], default="direct")
    c.add_argument(
        "--calibration-ccds",
        type=int,
        default=8,
        help="CCDs per exposure of the second calibration run (default 8)",
    )
    c.add_argument(
        "--calibration",
        type=Path,
        metavar="FILE",
        help="reuse this calibration if it exists, else write it there",
    )
    c.add_argument("--cores-per-node", type=int, default=16)
    c.add_argument(
        "--cpu-scale",
        type=float,
        default=1.0,
        help="the camera's edge/facility CPU seconds per CCD over this machine's",
    )
    c.add_argument(
        "--extra-latency",
        type=float,
        default=0.0,
        help="seconds a WAN adds to one CCD's own pipeline (round trips)",
    )
    c.add_argument(
        "--predict",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[1, 4, 8, 16, 24],
        metavar="N,N,...",
        help="CCD counts to predict on this machine (default 1,4,8,16,24)",
    )
    c.add_argument("--run-dir", type=Path, default=Path(".run/bench/capacity"))
    c.add_argument("--json", type=Path, metavar="FILE", help="write the model's output as JSON")
    c.set_defaults(func=calls("obsingest_cli.script.bench_transfer:run_capacity"))
