"""``obsingest compress``: parallel tiled Rice compression of one FITS file, fpack-compatible."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DESCRIPTION = """\
Compress a FITS file (e.g. a raw CCD) into an fpack-compatible .fits.fz with lossless tiled Rice.
Integer image HDUs are compressed in parallel, one task per HDU (one amplifier per tile by
default); other HDUs are copied. funpack, astropy and fitsio read the result. Prints sizes,
seconds and MB/s (of uncompressed input, read + compress + write)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compress",
        help="compress a FITS file to fpack-compatible .fits.fz (tiled Rice, multi-threaded)",
        description=DESCRIPTION,
    )
    parser.add_argument("input", metavar="IN.fits", type=Path, help="FITS file to compress")
    parser.add_argument("output", metavar="OUT.fits.fz", type=Path, help="where to write")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="worker threads (default: number of CPUs)",
    )
    parser.add_argument(
        "--tile-rows",
        type=int,
        default=None,
        metavar="N",
        help="rows per Rice tile (default: whole HDU, one tile per amplifier; 1 = fpack's tiling)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from obsingest.errors import CorruptFile
    from producers.compress import compress_file

    if args.threads is not None and args.threads < 1:
        print("error: --threads must be >= 1", file=sys.stderr)
        return 2
    if args.tile_rows is not None and args.tile_rows < 1:
        print("error: --tile-rows must be >= 1", file=sys.stderr)
        return 2
    try:
        result = compress_file(args.input, args.output, args.threads, args.tile_rows)
    except CorruptFile as exc:
        print(f"error: {args.input}: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.input} -> {args.output}: {result.raw_bytes:,} -> {result.compressed_bytes:,} bytes "
        f"(ratio {result.ratio:.2f}) in {result.seconds:.3f} s, {result.mb_per_s:.0f} MB/s, "
        f"{result.threads} thread(s)"
    )
    return 0
