"""``obsingest daq``: the DAQ simulator on the command line (write realistic raw CCDs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from obsingest import defaults

DESCRIPTION = """\
Simulate the camera's data acquisition: write raw CCD readouts as multi-extension FITS
(header-only primary + 16 int32 amplifier segments with bias, sky, read noise, stars and cosmic
rays), deterministic by data id and seed."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "daq", help="simulate the camera DAQ: write raw CCD FITS files", description=DESCRIPTION
    )
    daq_sub = parser.add_subparsers(dest="daq_command", metavar="ACTION")
    write = daq_sub.add_parser(
        "write",
        help="write one raw CCD to a FITS file",
        description="Write one simulated raw CCD (atomically: temp file + rename).",
    )
    write.add_argument("output", metavar="OUT.fits", type=Path, help="file to write")
    write.add_argument(
        "--instrument", default="LSSTCam", help="LSSTCam or LSSTComCam (default: LSSTCam)"
    )
    write.add_argument(
        "--exposure",
        type=int,
        required=True,
        help="exposure id, day_obs * 100000 + seq_num (e.g. 2026112200012)",
    )
    write.add_argument("--detector", type=int, required=True, help="detector id (LSSTCam 0..188)")
    write.add_argument(
        "--size",
        choices=("full", "small"),
        default="full",
        help="full = 16 x 2048x576 int32 amplifiers (75.6 MB); small = same structure, 64x32",
    )
    write.add_argument("--filter", default="r", help="filter band (default: r)")
    write.add_argument(
        "--exptime", type=float, default=30.0, help="exposure time, seconds (default: 30)"
    )
    write.add_argument(
        "--obs-start",
        default=None,
        help="ISO start time with timezone (default: now, UTC)",
    )
    write.add_argument("--seed", type=int, default=0, help="simulator seed (default: 0)")
    write.set_defaults(func=run_write)
    night = daq_sub.add_parser(
        "night",
        help="play a night into an edge hand-off directory at the summit's cadence",
        description="Every --interval seconds, write one exposure's manifest and raw CCDs into "
        "HANDOFF (temp name, then rename: the edge's hand-off convention). With "
        "--publish-manifests each manifest is also published, at its readout and before its "
        "CCDs, as an ExposureManifest on the bus's exposures topic (OBSINGEST_BUS_BACKEND, "
        "OBSINGEST_BUS_EXPOSURES_TOPIC); one that cannot be published after retries is "
        "reported on stderr, the night goes on, and the exit status is 1.",
    )
    night.add_argument("handoff", type=Path, metavar="HANDOFF", help="hand-off directory")
    night.add_argument("--instrument", default="LSSTCam", help="LSSTCam or LSSTComCam")
    night.add_argument("--exposures", type=int, default=10, help="exposures (default 10)")
    night.add_argument("--detectors", type=int, default=9, help="CCDs per exposure (default 9)")
    night.add_argument(
        "--interval",
        type=float,
        default=defaults.CADENCE_SECONDS,
        help="seconds between exposures (default: %(default)s, the summit's cadence)",
    )
    night.add_argument("--size", choices=("full", "small"), default="small", help="CCD size")
    night.add_argument("--day-obs", type=int, default=None, help="YYYYMMDD (default: today)")
    night.add_argument("--first-seq", type=int, default=1, help="first sequence number")
    night.add_argument("--seed", type=int, default=0, help="simulator seed")
    night.add_argument(
        "--publish-manifests",
        action="store_true",
        help="also publish each ExposureManifest on the exposures topic (default: files only)",
    )
    night.set_defaults(func=run_night)
    parser.set_defaults(func=lambda _args: parser.print_help() or 2)


def run_night(args: argparse.Namespace) -> int:
    from obsingest_cli.script.daq import night

    return night(args)


def run_write(args: argparse.Namespace) -> int:
    from obsingest_cli.script.daq import write_one

    return write_one(args)
