"""``obsingest compress``: an fpack drop-in (fpack's flags, names, messages and exit codes) over
our parallel tiled Rice coder. The whole command lives in ``producers.compress.fpack_cli``; this
module only hands it the arguments, so building the CLI parser imports nothing heavy."""

from __future__ import annotations

import argparse

HELP = "compress FITS files like fpack (same flags and exit codes), tiled Rice, all cores"


def register(subparsers: argparse._SubParsersAction) -> None:
    # fpack's grammar is not argparse's (-h is Hcompress, -q4, -i2f ...): every argument after
    # `compress` is passed through untouched. A prefix character that cannot occur in argv makes
    # argparse treat "-O", "-h" ... as plain values; `-H`/`--help` print fpack_cli's help.
    parser = subparsers.add_parser("compress", help=HELP, description=HELP, add_help=False, prefix_chars="\0")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from producers.compress.fpack_cli import main

    return main(args.argv)
