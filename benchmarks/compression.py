"""Compression benchmark: ours vs fpack, gzip -1 and astropy on the reference CCD, same run.

Every tool goes file -> file from the page cache (read, compress, write), timed by wall clock;
external tools run as subprocesses, so their process start-up (a few ms) is included, as it is in
the observatory's figures. fpack is measured alone and with the copy of the raw file before it
(the observatory's "copy + compress" figure). gzip is the ``gzip -1 -c`` command. Each figure is
the median of ``repeats`` runs, taken round-robin across methods so background load on a shared
machine affects all of them alike (the 1-minute load average is recorded). MB/s are of
uncompressed input, 10**6 bytes. Our outputs are checked to round-trip bit-identically.

Run: ``python -m benchmarks.compression [--repeats N]``; writes benchmarks/results/compression.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "compression.json"
GOAL_SPEEDUP = 1.5
GOAL_SIZE_TOLERANCE = 0.01


def _reference_spec():
    from producers.daq.simulator import CcdSpec

    return CcdSpec(
        instrument="LSSTCam",
        exposure=2026112200012,
        detector=94,
        day_obs=20261122,
        obs_start=datetime(2026, 11, 23, 3, 4, 5, tzinfo=UTC),
        exposure_time=30.0,
        filter="r",
        size="full",
        seed=0,
    )


def _time_round_robin(
    methods: list[tuple[str, str, Callable[[], None]]], out: Path, repeats: int
) -> dict[str, tuple[list[float], int]]:
    """Wall-clock samples per method, interleaved (A B C A B C ...) so that background load on a
    shared machine hits every method alike; also the output size of each method."""
    samples: dict[str, list[float]] = {name: [] for name, _, _ in methods}
    sizes: dict[str, int] = {}
    for name, _, fn in methods:
        fn()  # warm-up: imports, page cache, thread pool
        sizes[name] = out.stat().st_size
    for _ in range(repeats):
        for name, _, fn in methods:
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: (samples[name], sizes[name]) for name in samples}


def _astropy(src: Path, dst: Path, whole_amp: bool) -> None:
    from astropy.io import fits

    with fits.open(src) as hdus, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fits.HDUList([fits.PrimaryHDU(header=hdus[0].header)])
        for hdu in hdus[1:]:
            tile = hdu.data.shape if whole_amp else None
            out.append(
                fits.CompImageHDU(hdu.data, hdu.header, compression_type="RICE_1", tile_shape=tile)
            )
        out.writeto(dst, overwrite=True)


def _versions() -> dict[str, str]:
    import astropy
    import numpy

    fpack = subprocess.run(["fpack", "-V"], capture_output=True, text=True, check=False)
    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "astropy": astropy.__version__,
        "fpack": (fpack.stdout or fpack.stderr).strip(),
    }


def run(repeats: int = 5) -> dict:
    """Measure every method on the reference CCD; return (and write) the results."""
    from producers.compress import compress_file, decompress_fits
    from producers.daq.simulator import write_raw_ccd

    if not shutil.which("fpack") or not shutil.which("gzip"):
        raise RuntimeError("fpack and gzip must be on PATH (Debian: libcfitsio-bin, gzip)")
    with tempfile.TemporaryDirectory(prefix="obsingest-bench-") as tmp:
        work = Path(tmp)
        src = write_raw_ccd(_reference_spec(), work / "raw.fits")
        raw_bytes = src.stat().st_size
        out = work / "out.fits.fz"

        def fpack() -> None:
            out.unlink(missing_ok=True)
            subprocess.run(["fpack", "-O", str(out), str(src)], check=True)

        def copy_fpack() -> None:
            out.unlink(missing_ok=True)
            copy = work / "copy.fits"
            shutil.copyfile(src, copy)
            subprocess.run(["fpack", "-O", str(out), str(copy)], check=True)
            copy.unlink()

        def gzip1() -> None:
            with open(out, "wb") as fh:
                subprocess.run(["gzip", "-1", "-c", str(src)], stdout=fh, check=True)

        def ours(threads: int, tile_rows: int | None = None) -> Callable[[], None]:
            return lambda: compress_file(src, out, threads=threads, tile_rows=tile_rows)

        methods: list[tuple[str, str, Callable[[], None]]] = [
            ("fpack", "fpack (row tiles), file -> file", fpack),
            ("fpack+copy", "cp raw + fpack, like the observatory figure", copy_fpack),
            ("gzip-1", "gzip -1 -c (command)", gzip1),
            (
                "astropy-rows",
                "astropy CompImageHDU RICE_1, default row tiles",
                lambda: _astropy(src, out, False),
            ),
            (
                "astropy-amp",
                "astropy CompImageHDU RICE_1, whole-amplifier tiles",
                lambda: _astropy(src, out, True),
            ),
            ("ours-1t", "obsingest compress, 1 thread, whole-amplifier tiles", ours(1)),
            ("ours-2t", "obsingest compress, 2 threads, whole-amplifier tiles", ours(2)),
            ("ours-2t-rows", "obsingest compress, 2 threads, 1-row tiles (fpack's)", ours(2, 1)),
        ]
        for name, _, fn in methods:
            if name.startswith("ours"):
                fn()
                if decompress_fits(out.read_bytes()) != src.read_bytes():
                    raise RuntimeError(f"{name}: round trip is not bit-identical")
        load_before = os.getloadavg()
        timings = _time_round_robin(methods, out, repeats)
        load_after = os.getloadavg()
        rows = []
        for name, what, _ in methods:
            samples, size = timings[name]
            seconds = statistics.median(samples)
            rows.append(
                {
                    "method": name,
                    "what": what,
                    "seconds": round(seconds, 4),
                    "min_seconds": round(min(samples), 4),
                    "bytes": size,
                    "mb_per_s": round(raw_bytes / 1e6 / seconds, 1),
                }
            )
    by = {r["method"]: r for r in rows}
    for r in rows:
        r["speed_vs_fpack"] = round(r["mb_per_s"] / by["fpack"]["mb_per_s"], 2)
        r["size_vs_fpack"] = round(r["bytes"] / by["fpack"]["bytes"], 4)
    best = by["ours-2t"]
    result = {
        "benchmark": "compression",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "loadavg_1min_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        },
        "versions": _versions(),
        "input": {"description": "reference raw CCD, 16 x 2048x576 int32", "bytes": raw_bytes},
        "repeats": repeats,
        "statistic": "median wall seconds of round-robin repeats (min also given)",
        "rows": rows,
        "goal": {
            "speed_vs_fpack_min": GOAL_SPEEDUP,
            "size_vs_fpack_max": 1 + GOAL_SIZE_TOLERANCE,
            "speed_vs_fpack": best["speed_vs_fpack"],
            "size_vs_fpack": best["size_vs_fpack"],
            "met": best["speed_vs_fpack"] >= GOAL_SPEEDUP
            and best["size_vs_fpack"] <= 1 + GOAL_SIZE_TOLERANCE,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_table(result: dict) -> str:
    """Markdown table of a ``run()`` result."""
    lines = [
        "| method | seconds | bytes | MB/s | speed vs fpack | size vs fpack |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['seconds']:.3f} | {r['bytes']:,} | {r['mb_per_s']:.0f} "
            f"| {r['speed_vs_fpack']:.2f}x | {r['size_vs_fpack']:.4f} |"
        )
    goal = result["goal"]
    lines.append("")
    lines.append(
        f"Goal (>= {goal['speed_vs_fpack_min']}x fpack MB/s, size <= {goal['size_vs_fpack_max']}"
        f" x fpack): {'met' if goal['met'] else 'NOT met'} "
        f"({goal['speed_vs_fpack']}x, size {goal['size_vs_fpack']})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per method (median)")
    args = parser.parse_args(argv)
    result = run(args.repeats)
    print(format_table(result))
    print(f"\nwritten {RESULTS}")
    return 0 if result["goal"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
