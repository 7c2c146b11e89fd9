"""``obsingest compress``: fpack's command line over our parallel tiled Rice coder.

A drop-in for ``fpack`` on integer images: same flags, output names, messages and exit codes
(``fpack_args``). Differences, on purpose: every image HDU of every file is compressed in
parallel; a bad file does not stop the others (the exit status is still the first failure's) and
nothing is written for it; truncated files are refused (fpack zero-fills them); ``-D``/``-F``
destroy an input only after the output was read back, compared and fsynced; the default tile is
the whole image (``-w``). Imports stay light (the package doc says why).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from obsingest.errors import CorruptFile
from obsingest.fits import STATUS_TEXT, FitsFormatError, Hdu
from producers.compress import restore, tiled_rice
from producers.compress.fpack_args import HELP, CommandLineError, Options, parse_args, preflight
from producers.compress.output import publish, sync_directory

#: CFITSIO's DATA_COMPRESSION_ERR: what fpack exits with when compressing an HDU fails
COMPRESSION_FAILED = 413
FPACK_COMPATIBLE = "fpack 1.7.0"


@dataclass
class _Input:
    """One input file on its way through the pipeline."""

    name: str  # as given (fpack's infits), for messages
    source: str  # what is read: the name, its .gz, or "-" for stdin
    target: str  # output file, or "-" for stdout
    data: bytes | mmap.mmap | None = None  # None once closed
    mapping: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    hdus: list[Hdu] = field(default_factory=list)
    futures: list[Future[list[bytes]]] = field(default_factory=list)


class _Run:
    """The files of one command, in order; remembers the first failure's status."""

    def __init__(self, opts: Options, out: TextIO, err: TextIO) -> None:
        self.opts = opts
        self.out = out
        self.err = err
        self.status = 0
        self.pool = ThreadPoolExecutor(max_workers=tiled_rice.workers(opts.threads))

    def fail(self, status: int, stdout: str = "", stderr: str = "") -> None:
        self.out.write(stdout)
        self.out.flush()
        self.err.write(stderr)
        self.err.flush()
        if not self.status:
            self.status = status

    def fitsio_fail(self, status: int, name: str, reason: object, stdout: str = "") -> None:
        """A failure in fpack's words: CFITSIO's status line on stderr, then the file and why."""
        text = STATUS_TEXT.get(status, "error")
        self.fail(status, stdout, f"\nFITSIO status = {status}: {text}\n{name}: {reason}\n")

    def fits_error(self, item: _Input, exc: CorruptFile) -> None:
        """fpack's report: a fault in the primary header is an open error (stderr only); a
        later one names the HDU on stdout too. Then the status line and our reason."""
        status, hdu = (exc.status, exc.hdu) if isinstance(exc, FitsFormatError) else (108, None)
        stdout = ""
        if hdu:
            stdout = f"Error processing file: {item.name}\n  in HDU number {hdu}\n"
            stdout += "Input file is unchanged.\n"
        self.fitsio_fail(status, item.name, exc, stdout)

    def open(self, item: _Input) -> bool:
        """Read or map the input and queue its compression jobs; False (reported) if bad."""
        try:
            if item.source == "-":
                item.data = sys.stdin.buffer.read()
            elif item.source.endswith(".gz"):
                import gzip  # only for gzipped inputs, as CFITSIO reads them

                with gzip.open(item.source, "rb") as fh:
                    item.data = fh.read()
            else:
                item.data = item.mapping.enter_context(tiled_rice.mapped_file(Path(item.source)))
        except (OSError, EOFError) as exc:  # EOFError: a truncated .gz
            status = 108 if isinstance(exc, (IsADirectoryError, EOFError)) else 104
            self.fitsio_fail(status, item.name, getattr(exc, "strerror", None) or exc)
            return False
        try:
            item.hdus, jobs = tiled_rice.plan(memoryview(item.data), self.opts.tiling, self.opts.checksum)
        except CorruptFile as exc:
            self.fits_error(item, exc)
            self.close(item)
            return False
        item.futures = [self.pool.submit(job) for job in jobs]
        return True

    def close(self, item: _Input) -> None:
        item.hdus, item.futures = [], []
        item.mapping.close()
        item.data = None

    def finish(self, item: _Input) -> None:
        """Write one file whose jobs were queued, then -D/-F and -v, as fpack's loop does."""
        try:
            try:
                parts = [part for future in item.futures for part in future.result()]
            except (ValueError, MemoryError) as exc:
                self.fail(
                    COMPRESSION_FAILED,
                    f"Error processing file: {item.name}\nInput file is unchanged.\n",
                    f"\nFITSIO status = {COMPRESSION_FAILED}: {exc}\n",
                )
                return
            if item.target == "-":
                sys.stdout.buffer.writelines(parts)
                sys.stdout.buffer.flush()
                return
            self.write(item, parts)
        finally:
            self.close(item)

    def write(self, item: _Input, parts: list[bytes]) -> None:
        opts = self.opts
        destroys_input = (opts.clobber or opts.delete_input) and item.source != "-"
        check = (lambda path: self.verify(item, path)) if destroys_input else None
        try:
            publish(Path(item.target), parts, durable=destroys_input, check=check)
        except CorruptFile as exc:
            self.fail(
                COMPRESSION_FAILED,
                f"Error: {item.target} does not restore {item.name}: {exc}\n" + "Input file is unchanged.\n",
            )
            return
        except OSError as exc:  # fpack's report when it cannot create the output
            stdout = f"Error processing file: {item.name}\n  in HDU number 1\n"
            self.fitsio_fail(105, item.target, exc.strerror or exc, stdout)
            return
        if destroys_input and item.target != item.source:
            try:
                os.unlink(item.source)
                sync_directory(Path(item.source).resolve().parent)
            except OSError:
                self.fail(255, f"\nError deleting input file {item.source}\n")
                return
        elif (opts.clobber or opts.delete_input) and item.source == "-":
            self.err.write("Note: -D/-F do not apply to standard input: nothing deleted\n")
        if opts.verbose:
            self.out.write(f"{item.name} -> {item.target}\n")

    def verify(self, item: _Input, path: Path) -> None:
        """The written file decodes to the input, HDU by HDU (CorruptFile if not)."""
        assert item.data is not None  # write() verifies before the input is closed
        with tiled_rice.mapped_file(path) as written:
            packed = memoryview(written)
            try:
                jobs = restore.verify_plan(packed, memoryview(item.data), item.hdus)
                for future in [self.pool.submit(job) for job in jobs]:
                    future.result()
            finally:
                with contextlib.suppress(BufferError):  # a traceback may still hold a view
                    packed.release()


def run(opts: Options, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Compress every file of ``opts``; the exit status (0, or the first failure's)."""
    out, err = out or sys.stdout, err or sys.stderr
    plan = preflight(opts)
    if opts.to_stdout and (opts.clobber or opts.delete_input):
        err.write("Note: -D/-F do not apply with -S (as with fpack): inputs are kept\n")
    state = _Run(opts, out, err)
    window: deque[_Input] = deque()
    # files in flight: enough to keep every worker busy while the main thread writes one
    limit = tiled_rice.workers(opts.threads) + 1
    try:
        for name, source, target in plan:
            item = _Input(name=name, source=source, target=target)
            if state.open(item):
                window.append(item)
            while len(window) > limit:
                state.finish(window.popleft())
        while window:
            state.finish(window.popleft())
    finally:
        for item in window:
            state.close(item)
        state.pool.shutdown(wait=True, cancel_futures=True)
    return state.status


def main(argv: list[str] | None = None) -> int:
    """``obsingest compress`` / ``python -m producers.compress``: fpack's arguments -> status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(argv)
        if opts.show == "help":
            sys.stdout.write(HELP)
            return 0
        if opts.show == "version":
            sys.stdout.write(f"obsingest compress ({FPACK_COMPATIBLE} command line, lossless tiled RICE_1)\n")
            return 0
        return run(opts)
    except CommandLineError as exc:
        sys.stdout.write(exc.message)
        sys.stdout.flush()
        return exc.code
    except BrokenPipeError:  # -S into a pipe closed early (`| head`): fpack dies of SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
