"""``obsingest daq``: the DAQ simulator on the command line (write realistic raw CCDs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from obsingest import defaults
from obsingest_cli.options import calls

DESCRIPTION = """\
Simulate the camera's data acquisition: write raw CCD readouts as multi-extension FITS
(header-only primary + 16 int32 amplifier segments with bias, sky, read noise, stars and cosmic
rays), deterministic by data id and seed, under the camera's file names
(MC_O_20261122_000012_R22_S11.fits) with the camera's header cards (INSTRUME lsstCam, OBSID,
DAYOBS, SEQNUM, RAFTBAY, CCDSLOT, DATE-BEG/DATE-END in TAI, ...). --template takes a real
header (a YAML or JSON card dump) and replaces only its identity and time cards."""

TEMPLATE_HELP = (
    "a real header as a YAML or JSON card dump (obs_lsst tests/headers); its cards are written "
    "with each CCD's identity and times (default instrument: the template's)"
)


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
    write.add_argument(
        "output",
        metavar="OUT",
        type=Path,
        help="file to write, or a directory to write the camera's file name into",
    )
    write.add_argument("--instrument", help="LSSTCam, LSSTComCam or LATISS (default: LSSTCam)")
    write.add_argument(
        "--exposure",
        type=int,
        required=True,
        help="exposure id, day_obs * 100000 + seq_num (e.g. 2026112200012)",
    )
    write.add_argument("--detector", type=int, help="detector id (LSSTCam 0..204; or the template's)")
    write.add_argument(
        "--size",
        choices=("full", "small"),
        default="full",
        help="full = 16 x 2048x576 int32 amplifiers (75.6 MB); small = same structure, 64x32",
    )
    write.add_argument("--filter", default="r", help="filter band (default: r)")
    write.add_argument(
        "--exptime", type=float, help="exposure time, seconds (default: the template's, else 30)"
    )
    write.add_argument(
        "--obs-start",
        help="UTC start of integration, ISO with timezone (default: now); the header says it in "
        "TAI, 37 s later",
    )
    write.add_argument("--template", type=Path, metavar="FILE", help=TEMPLATE_HELP)
    write.add_argument("--seed", type=int, default=0, help="simulator seed (default: 0)")
    write.set_defaults(func=calls("obsingest_cli.script.daq:write_one"))
    night = daq_sub.add_parser(
        "night",
        help="play a night into an edge hand-off directory at the summit's cadence",
        description="Every --interval seconds, write one exposure's manifest and raw CCDs into "
        "HANDOFF under the camera's names in <day_obs>/<obs_id>/ (temp name, then rename: the "
        "edge's hand-off convention). With "
        "--publish-manifests each manifest is also published, at its readout and before its "
        "CCDs, as an ExposureManifest on the bus's exposures topic (OBSINGEST_BUS_BACKEND, "
        "OBSINGEST_BUS_EXPOSURES_TOPIC); one that cannot be published after retries is "
        "reported on stderr, the night goes on, and the exit status is 1.",
    )
    night.add_argument("handoff", type=Path, metavar="HANDOFF", help="hand-off directory")
    night.add_argument("--instrument", help="LSSTCam, LSSTComCam or LATISS (default: LSSTCam)")
    night.add_argument("--exposures", type=int, default=10, help="exposures (default 10)")
    night.add_argument("--detectors", type=int, default=9, help="CCDs per exposure (default 9)")
    night.add_argument(
        "--interval",
        type=float,
        default=defaults.CADENCE_SECONDS,
        help="seconds between exposures (default: %(default)s, the summit's cadence)",
    )
    night.add_argument("--size", choices=("full", "small"), default="small", help="CCD size")
    night.add_argument("--day-obs", type=int, help="YYYYMMDD (default: today)")
    night.add_argument("--first-seq", type=int, default=1, help="first sequence number")
    night.add_argument("--seed", type=int, default=0, help="simulator seed")
    night.add_argument("--template", type=Path, metavar="FILE", help=TEMPLATE_HELP)
    night.add_argument(
        "--sidecars",
        action="store_true",
        help="also write each CCD's JSON header sidecar ({file stem}.json) before it",
    )
    night.add_argument(
        "--publish-manifests",
        action="store_true",
        help="also publish each ExposureManifest on the exposures topic (default: files only)",
    )
    night.set_defaults(func=calls("obsingest_cli.script.daq:night"))
    parser.set_defaults(func=lambda _args: parser.print_help() or 2)
