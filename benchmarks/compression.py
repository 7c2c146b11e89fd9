"""Compression benchmark: ours vs fpack, gzip -1 and astropy on the reference CCD, same run.

File -> file from the page cache, medians of round-robin repeats; external tools as subprocesses
(start-up included, as in the observatory's figures); our outputs must round-trip bit-identically.
Then whole processes (issue 16), a fresh one per call, on one CCD and on the demo's 27 CCDs.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import cli, save_result, tool_version

GOAL_SPEEDUP = 1.5
GOAL_SIZE_TOLERANCE = 0.01
DEMO_EXPOSURES, DEMO_DETECTORS = 3, 9
ONE, MANY = "1 CCD per call", f"{DEMO_EXPOSURES * DEMO_DETECTORS} CCDs in one call"
#: whole-process goals: fpack's wall time / ours, one CCD per call and the demo's CCDs in one call
GOAL_PROCESS = {ONE: 1.0, MANY: 1.5}


def _spec(instrument: str = "LSSTCam", exposure: int = 2026112200012, detector: int = 94):
    """The reference CCD by default; the demo's CCDs are LSSTComCam's."""
    from obsingest.dataid import exposure_day_obs
    from producers.daq.simulator import CcdSpec

    start = datetime(2026, 11, 23, 3, 4, 5, tzinfo=UTC)
    return CcdSpec(
        instrument, exposure, detector, exposure_day_obs(exposure), start, 30.0, "r", "full", seed=0
    )


def _round_robin(
    cases: Mapping[str, tuple[Callable[[], object], list[Path]]], repeats: int, clear: bool = False
) -> dict[str, tuple[list[float], int]]:
    """Wall-clock samples of each case, interleaved (A B C A B C ...) after an untimed warm-up
    round, so that background load hits every case alike; the size of its outputs after the
    warm-up. ``clear``: its outputs deleted before every run, untimed."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    sizes: dict[str, int] = {}
    for rep in range(repeats + 1):
        for name, (fn, outputs) in cases.items():
            for path in outputs if clear else ():
                path.unlink(missing_ok=True)
            start = time.perf_counter()
            fn()
            if rep:
                samples[name].append(time.perf_counter() - start)
            else:  # warm-up: imports, page cache, thread pool
                sizes[name] = sum(path.stat().st_size for path in outputs)
    return {name: (samples[name], sizes[name]) for name in cases}


def _timing(samples: list[float], size: int) -> dict[str, Any]:
    return {
        "seconds": round(statistics.median(samples), 4),
        "min_seconds": round(min(samples), 4),
        "bytes": size,
    }


def _astropy(src: Path, dst: Path, whole_amp: bool) -> None:
    from astropy.io import fits

    with fits.open(src) as hdus, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fits.HDUList([fits.PrimaryHDU(header=hdus[0].header)])
        for hdu in hdus[1:]:
            tile = hdu.data.shape if whole_amp else None
            out.append(fits.CompImageHDU(hdu.data, hdu.header, compression_type="RICE_1", tile_shape=tile))
        out.writeto(dst, overwrite=True)


def _versions() -> dict[str, str]:
    import astropy
    import numpy

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "astropy": astropy.__version__,
        "fpack": tool_version("fpack", "-V"),
    }


def run(repeats: int = 5, process_repeats: int = 5) -> dict:
    """Every method on the reference CCD, then the whole processes; written and returned."""
    from producers.compress import compress_file
    from producers.daq.simulator import write_raw_ccd

    if not shutil.which("fpack") or not shutil.which("gzip"):
        raise RuntimeError("fpack and gzip must be on PATH (Debian: libcfitsio-bin, gzip)")
    with tempfile.TemporaryDirectory(prefix="obsingest-bench-") as tmp:
        work = Path(tmp)
        src = write_raw_ccd(_spec(), work / "raw.fits")
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

        def astropy(whole_amp: bool) -> Callable[[], object]:
            return lambda: _astropy(src, out, whole_amp)

        def ours(threads: int, tile_rows: int | None = None) -> Callable[[], object]:
            return lambda: compress_file(src, out, threads=threads, tile_rows=tile_rows)

        methods: list[tuple[str, str, Callable[[], object]]] = [
            ("fpack", "fpack (row tiles), file -> file", fpack),
            ("fpack+copy", "cp raw + fpack, like the observatory figure", copy_fpack),
            ("gzip-1", "gzip -1 -c (command)", gzip1),
            ("astropy-rows", "astropy CompImageHDU RICE_1, default row tiles", astropy(False)),
            ("astropy-amp", "astropy CompImageHDU RICE_1, whole-amplifier tiles", astropy(True)),
            ("ours-1t", "compress_file, 1 thread, whole-amplifier tiles", ours(1)),
            ("ours-2t", "compress_file, 2 threads, whole-amplifier tiles", ours(2)),
            ("ours-2t-rows", "compress_file, 2 threads, 1-row tiles (fpack's)", ours(2, 1)),
        ]
        for name, _, fn in methods:
            if name.startswith("ours"):
                fn()
                _check_round_trip(out, src, name)
        load_before = os.getloadavg()
        timings = _round_robin({name: (fn, [out]) for name, _, fn in methods}, repeats)
        load_after = os.getloadavg()
        rows: list[dict[str, Any]] = []
        for name, what, _ in methods:
            row = {"method": name, "what": what, **_timing(*timings[name])}
            row["mb_per_s"] = round(raw_bytes / 1e6 / statistics.median(timings[name][0]), 1)
            rows.append(row)
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
    result["whole_process"] = whole_process(process_repeats)
    save_result("compression", result)
    return result


def _write_demo_ccd(work: str, exposure: int, detector: int) -> str:
    from producers.daq.simulator import write_raw_ccd

    spec = _spec("LSSTComCam", exposure, detector)
    return write_raw_ccd(spec, Path(work) / spec.file_name).name  # the camera's name


def _write_demo_ccds(work: Path) -> list[str]:
    """The demo's raw CCDs (3 exposures x 9 detectors), simulated on every core."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    jobs = [(2026112200012 + e, d) for e in range(DEMO_EXPOSURES) for d in range(DEMO_DETECTORS)]
    with ProcessPoolExecutor(os.cpu_count(), mp_context=get_context("spawn")) as pool:
        return list(pool.map(_write_demo_ccd, [str(work)] * len(jobs), *zip(*jobs, strict=True)))


def _obsingest_command() -> list[str]:
    """The ``obsingest`` entry point a user runs (the console script beside this Python)."""
    script = Path(sys.executable).with_name("obsingest")
    return [str(script)] if script.exists() else [sys.executable, "-m", "obsingest_cli"]


def _command(name: str, argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{name}: exit {done.returncode}: {(done.stdout + done.stderr)!r}")


def _processes(cases: list[tuple[str, list[str], list[Path]]], cwd: Path, repeats: int) -> dict:
    """``_round_robin`` of each command as a fresh process, its outputs (``cases``' third item)
    deleted before every run."""
    calls = {name: (functools.partial(_command, name, argv, cwd), outputs) for name, argv, outputs in cases}
    return _round_robin(calls, repeats, True)


def _check_round_trip(fz: Path, raw: Path, name: str = "") -> None:
    from producers.compress import decompress_fits

    if decompress_fits(fz.read_bytes()) != raw.read_bytes():
        raise RuntimeError(f"{name or fz.name}: round trip is not bit-identical")


def whole_process(repeats: int = 5) -> dict:
    """fpack and our two commands as whole processes: one CCD per call, then 27 in one call."""
    from producers.daq.simulator import write_raw_ccd

    cli = [*_obsingest_command(), "compress"]
    lib = [sys.executable, "-m", "producers.compress"]
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="obsingest-bench-process-") as tmp:
        work = Path(tmp)
        src = write_raw_ccd(_spec(), work / "raw.fits").name
        out = {m: work / f"{m}.fz" for m in ("fpack", "cli", "lib", "rows")}
        one = [
            ("fpack", ["fpack", "-O", out["fpack"].name, src], [out["fpack"]]),
            ("obsingest compress", [*cli, "-O", out["cli"].name, src], [out["cli"]]),
            ("python -m producers.compress", [*lib, "-O", out["lib"].name, src], [out["lib"]]),
            (
                "python -m producers.compress -t 0,1 (fpack's row tiles)",
                [*lib, "-t", "0,1", "-O", out["rows"].name, src],
                [out["rows"]],
            ),
        ]
        timed = _processes(one, work, repeats)
        for name in ("cli", "lib", "rows"):
            _check_round_trip(out[name], work / src)
        rows += _process_rows(ONE, one, timed, 1)
        for path in work.iterdir():
            path.unlink()
        names = _write_demo_ccds(work)
        outputs = [work / f"{name}.fz" for name in names]
        many = [
            ("fpack", ["fpack", *names], outputs),
            ("obsingest compress", [*cli, *names], outputs),
            ("python -m producers.compress", [*lib, *names], outputs),
        ]
        timed = _processes(many, work, max(1, repeats // 2))
        for index in (0, len(names) - 1):
            _check_round_trip(outputs[index], work / names[index])
        rows += _process_rows(MANY, many, timed, len(names))
    goals = []
    for scenario, minimum in GOAL_PROCESS.items():
        for method in ("obsingest compress", "python -m producers.compress"):
            row = next(r for r in rows if r["scenario"] == scenario and r["method"] == method)
            goals.append(
                {
                    "scenario": scenario,
                    "method": method,
                    "min": minimum,
                    "speed_vs_fpack": row["speed_vs_fpack"],
                    "met": row["speed_vs_fpack"] >= minimum,
                }
            )
    return {
        "statistic": "median wall seconds of fresh processes, round-robin repeats (min given)",
        "repeats": {ONE: repeats, MANY: max(1, repeats // 2)},
        "loadavg_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "threads": os.cpu_count(),
        "rows": rows,
        "goals": goals,
        "met": all(g["met"] for g in goals if g["method"] == "obsingest compress"),
    }


def _display(argv: list[str], ccds: int) -> str:
    """The command line as a person would type it (program name, first file then ...)."""
    words = [Path(argv[0]).name, *argv[1:]]
    if ccds > 1:
        words = [*words[: len(words) - ccds + 1], "..."]
    return " ".join(words)


def _process_rows(scenario: str, cases: list, timed: dict, ccds: int) -> list[dict]:
    fpack = statistics.median(timed["fpack"][0])
    return [
        {
            "scenario": scenario,
            "method": name,
            "command": _display(argv, ccds),
            "ccds": ccds,
            **_timing(*timed[name]),
            "speed_vs_fpack": round(fpack / statistics.median(timed[name][0]), 2),
        }
        for name, argv, _ in cases
    ]


def format_section(result: dict[str, Any]) -> str:
    """The library's table, then the whole processes'."""
    process = result["whole_process"]
    repeats = ", ".join(f"{n} ({scenario})" for scenario, n in process["repeats"].items())
    goal = result["goal"]
    lines = [
        f"Reference raw CCD ({result['input']['bytes']:,} bytes), file -> file, median of "
        f"{result['repeats']} round-robin repeats; ratios against fpack measured in the same "
        "run. First the library (in-process, started and warm), then whole processes as a "
        "person runs them (a fresh process per call, start-up and imports included): `fpack`, "
        "`obsingest compress` (the CLI entry point) and `python -m producers.compress` (the same "
        "function without the CLI), one CCD per call and the demo's 27 CCDs in one call. "
        f"Whole-process repeats: {repeats}; 1-minute load average before/after "
        f"{process['loadavg_1min_before_after']}.",
        "",
        "| method | seconds | bytes | MB/s | speed vs fpack | size vs fpack |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['method']} | {r['seconds']:.3f} | {r['bytes']:,} | {r['mb_per_s']:.0f} "
            f"| {r['speed_vs_fpack']:.2f}x | {r['size_vs_fpack']:.4f} |"
            for r in result["rows"]
        ),
        "",
        f"Goal (>= {goal['speed_vs_fpack_min']}x fpack MB/s, size <= {goal['size_vs_fpack_max']}"
        f" x fpack): {'met' if goal['met'] else 'NOT met'} "
        f"({goal['speed_vs_fpack']}x, size {goal['size_vs_fpack']})",
        "",
        "| scenario | method | seconds (median) | min | output bytes | speed vs fpack |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['scenario']} | {r['method']} | {r['seconds']:.3f} | {r['min_seconds']:.3f} "
            f"| {r['bytes']:,} | {r['speed_vs_fpack']:.2f}x |"
            for r in process["rows"]
        ),
        "",
        *(
            f"- Goal {g['scenario']}, `{g['method']}` >= {g['min']}x fpack's wall time: "
            f"{'met' if g['met'] else 'NOT met'} ({g['speed_vs_fpack']}x)"
            for g in process["goals"]
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run, format_section, lambda r: r["goal"]["met"] and r["whole_process"]["met"]))
