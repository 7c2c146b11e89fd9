"""fpack's command line, read the way fpack reads it, for ``obsingest compress``.

Why by hand and not argparse: fpack's grammar is its own (flags first and separate, ``-q4``-style
glued values, ``-i2f``/``-n3ratio`` multi-letter flags, ``-h`` meaning Hcompress rather than
help) and its users' scripts depend on its messages and exit codes (255 for every command-line
error, messages on stdout). The checks follow fpack 1.7.0's ``fp_get_param`` and
``fp_preflight`` (CFITSIO ``utilities/fpack.c``, ``fpackutil.c``) in the same order. Flags that
cannot apply to what we do are refused with a message saying why, never silently ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from producers.compress.tiled_rice import Tiling

MAX_TILE_DIMS = 6  # CFITSIO's MAX_COMPRESS_DIM
NOOP = "Input and output files are unchanged.\n"
HINT = "      `obsingest compress -H' for help\n"
USAGE = (
    "usage: obsingest compress [-r] [-w|-t <axes>] [-v] [-F] [-D] [-Y] [-O <file>] [-S] [-C]\n"
    "                          [-H] [-V] [--threads N] <FITS> ...\n"
)
HELP = f"""\
obsingest compress, an fpack-compatible FITS image compressor: lossless tiled RICE_1, the
image HDUs of all input files compressed in parallel on all cores. The output is what fpack
writes (funpack, astropy, fitsio read it), with FITS checksums.
{USAGE}
Flags must be separate and appear before filenames (as for fpack):
 -r          Rice compression [default; the only algorithm].
 -w          Compress each image as a single large tile [default; fpack's is row by row].
 -t <axes>   Comma separated list of tile dimensions (`-t 0,1' is fpack's row by row).
 -v          Verbose mode; list each file as it is processed.
 -C          Don't update FITS checksum keywords.
 --threads N Worker threads [default: number of CPUs].

keywords shared with funpack:
 -F          Overwrite input file by output file with same name (after the written file
               is verified to restore the input exactly).
 -D          Delete input file after writing output (only after that verification).
 -Y          Suppress prompts to confirm -F or -D options (there are none: lossless only).
 -O <file>   Specify full output file name. This may be used only when run on a single
               input file.
 -S          Output compressed FITS files to STDOUT.
 -H          Show this message.
 -V          Show version number.

 <FITS>      FITS files to pack; enter '-' (a hyphen) to read input from stdin stream.

What is kept, not compressed: 8-bit, 64-bit and floating-point images, cubes and tables are
copied unchanged (lossless, where fpack would quantize floats). Refused, with the reason:
-h -g -g1 -g2 -p -d (other algorithms), -q/-qz/-qt/-qN, -s, -n, -i2f, -n3ratio, -n3min (lossy
quantisation), -T -R (algorithm comparison), -L (listing), -table -tableonly (table compression).
A bad input file does not stop the others; the exit status is that of the first failure,
with fpack's codes (255 for command-line errors, CFITSIO's status for unreadable FITS).
"""

_REFUSED = {
    "-h": "Hcompress is not supported: obsingest compress writes lossless RICE_1 only",
    **dict.fromkeys(("-g", "-g1"), "GZIP tiles are not supported: obsingest compress writes RICE_1 only"),
    "-g2": "GZIP_2 tiles are not supported: obsingest compress writes RICE_1 only",
    "-p": "PLIO is not supported: obsingest compress writes RICE_1 only",
    "-d": "uncompressed tiles are not supported: obsingest compress writes RICE_1 only",
    "-s": "lossy Hcompress scaling is not supported: obsingest compress is lossless only",
    "-n": "noise rescaling of scaled integers is lossy: obsingest compress is lossless only",
    "-i2f": "quantising integer images is lossy: obsingest compress keeps integers exact",
    **dict.fromkeys(("-n3ratio", "-n3min"), "applies to -i2f (lossy), which obsingest compress does not do"),
    "-T": "the algorithm comparison test is fpack's own: run fpack -T",
    "-R": "the algorithm comparison report is fpack's own: run fpack -T -R",
    "-L": "listing is not supported: run fpack -L or funpack -L",
    "-table": "table compression is not supported: tables are copied unchanged",
    "-tableonly": "table compression is not supported: tables are copied unchanged",
}
_QUANTIZE = (
    "quantising floating-point images is lossy and not supported: obsingest compress copies "
    "them unchanged (lossless)"
)


class CommandLineError(Exception):
    """fpack would exit with ``code`` after printing ``message`` (stdout, as fpack does)."""

    def __init__(self, message: str, code: int = 255) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class Options:
    """The parsed command line (fpack's ``fpstate``, the parts that apply)."""

    files: list[str] = field(default_factory=list)
    outfile: str | None = None
    to_stdout: bool = False
    clobber: bool = False
    delete_input: bool = False
    verbose: bool = False
    checksum: bool = True
    tiling: Tiling = None
    threads: int | None = None
    show: str | None = None  # "help" or "version": print it and exit 0


def _is_flag(arg: str) -> bool:
    """fpack's test: a two-character flag, or one of its longer flags."""
    if arg.startswith("-") and len(arg) == 2:
        return True
    return arg.startswith(("-q", "-g1", "-g2", "-i2f", "-n3ratio", "-n3min", "-table", "--"))


def _tiling(text: str) -> Tiling:
    if not text or any(not (ch.isdigit() or ch == ",") for ch in text):
        raise CommandLineError("Error: `-t' requires comma separated tile dims, e.g., `-t 100,100'\n")
    dims = tuple(int(part) for part in text.split(",") if part)
    if len(dims) > MAX_TILE_DIMS:
        raise CommandLineError(f"Error: too many dimensions for `-t', max={MAX_TILE_DIMS}\n")
    return dims or (0,)


def _threads(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise CommandLineError(f"Error: --threads needs a whole number >= 1, not {text!r}\n")
    return int(text)


def parse_args(argv: list[str]) -> Options:
    """Flags then files, fpack's rules; CommandLineError with fpack's message and code."""
    if not argv:
        raise CommandLineError(USAGE + HINT)
    opts = Options()
    got_type = got_tile = 0
    i = 0
    while i < len(argv) and _is_flag(argv[i]):
        arg = argv[i]

        def value(arg: str = arg) -> str:
            nonlocal i
            i += 1
            if i >= len(argv):
                raise CommandLineError(USAGE + (HINT if arg == "-O" else ""))
            return argv[i]

        if arg == "-r":
            if got_type:
                raise CommandLineError("Error: multiple compression flags\n" + USAGE)
            got_type += 1
        elif arg.startswith("-q"):
            raise CommandLineError(f"Error: `{arg}': {_QUANTIZE}\n")
        elif arg in _REFUSED or arg.startswith(("-g", "-table")):
            raise CommandLineError(f"Error: `{arg}': {_REFUSED.get(arg, _REFUSED['-g'])}\n")
        elif arg in ("-t", "-w"):
            if got_tile:
                raise CommandLineError("Error: multiple tile specifications\n" + USAGE)
            got_tile += 1
            opts.tiling = _tiling(value()) if arg == "-t" else None
        elif arg in ("-v", "-F", "-D", "-Y", "-S", "-C"):
            opts.verbose |= arg == "-v"
            opts.clobber |= arg == "-F"
            opts.delete_input |= arg == "-D"
            opts.to_stdout |= arg == "-S"
            opts.checksum &= arg != "-C"
        elif arg in ("-H", "--help", "-V", "--version"):
            opts.show = "help" if arg in ("-H", "--help") else "version"
            return opts
        elif arg == "-O":
            opts.outfile = value()
        elif arg == "--threads" or arg.startswith("--threads="):
            opts.threads = _threads(arg.partition("=")[2] if "=" in arg else value())
        else:
            raise CommandLineError(f"Error: unknown command line flag `{arg}'\n" + USAGE + HINT)
        i += 1
    if opts.outfile is not None and opts.to_stdout:
        raise CommandLineError("Error: -O option may not be used with -S or -T\n")
    if i >= len(argv):
        raise CommandLineError("Error: no FITS files to compress\n" + USAGE)
    opts.files = argv[i:]
    return opts


def output_name(name: str, clobber: bool) -> str:
    """fpack's output file name for input ``name``: .gz/.bz2 dropped, .imh -> .fits, + .fz."""
    out = "input.fits" if name == "-" else name
    for suffix in (".gz", ".bz2"):
        if out.endswith(suffix):
            out = out[: -len(suffix)]
            break
    if out.endswith(".imh"):
        out = out[:-4] + ".fits"
    return out if clobber else out + ".fz"


def preflight(opts: Options) -> list[tuple[str, str, str]]:
    """(name given, input to read, output to write or "-" for stdout) per file; CommandLineError
    at the first name fpack would refuse, before any file is touched (fpack's ``fp_preflight``)."""
    plan: list[tuple[str, str, str]] = []
    nfiles = 0
    for name in opts.files:
        if name.startswith("-") and name != "-":
            raise CommandLineError(f"Error: invalid input file name\n   {name}\n" + NOOP)
        if "[" in name or "]" in name:
            raise CommandLineError(f"Error: section/extension notation not supported: {name}\n" + NOOP)
        source = name
        if name != "-" and not os.access(name, os.R_OK):  # fpack's fp_access: a directory passes
            if not os.access(name + ".gz", os.R_OK):
                raise CommandLineError(f"Error: can't find or read input file {name}\n" + NOOP)
            source = name + ".gz"  # CFITSIO opens the gzipped file under the plain name
        if name.endswith(".fz"):
            raise CommandLineError(f"Error: fpack input file already has '.fz' suffix\n{name}\n" + NOOP)
        if opts.to_stdout:
            out = "-"
        elif opts.outfile is not None:
            nfiles += 1
            if nfiles > 1:
                raise CommandLineError(
                    f"Error: cannot use same output file name for multiple files:\n   {opts.outfile}\n" + NOOP
                )
            out = opts.outfile
        else:
            out = output_name(name, opts.clobber)
        # -O refuses any existing file; a derived name may be the input itself (-F)
        if not opts.to_stdout and (out != name or opts.outfile is not None) and os.access(out, os.R_OK):
            raise CommandLineError(f"Error: output file already exists:\n {out}\n " + NOOP)
        plan.append((name, source, out))
    return plan
