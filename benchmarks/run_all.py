"""``make bench``: every benchmark of the project in one go, then ``benchmarks/README.md``.

Each ``benchmarks/<name>.py`` with a top-level ``run`` runs in its own process with a timeout, so
one failure or hang does not stop the others; then the README is written from the results.
``python -m benchmarks.run_all NAME...`` re-runs only those: the others keep their last dated
records (``results/run_all.json``). Published figures come from a full ``make bench``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from datetime import UTC, datetime
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, ROOT, note, tool_version
from benchmarks.transfer import PLOT

BENCH = ROOT / "benchmarks"
README = BENCH / "README.md"
#: every benchmark's record of the last run that ran it (name, seconds, error, result, date)
RECORDS = RESULTS / "run_all.json"

#: Run first, in this order (the goals of issue 7); the rest follow alphabetically.
FIRST = ("compression", "transfer")
#: Seconds each benchmark may take; the whole run stays under ~25 minutes on 2 cores.
TIMEOUTS = {
    "compression": 300,
    "transfer": 660,
    "beam_batch": 300,
    "butler": 300,
    "butler_facility": 420,  # two fresh PostgreSQL repositories, 2 instances, butler ingest-files
    "edge": 480,
    "backfill": 540,  # 3 alternating repeats x 4 N x 2 tools; ~200 s quiet
    "presence": 360,
    "capacity": 720,  # 3 calibrations (the median decides), ~80-200 s each
    "facility": 720,  # fills 5,000 and 50,000 objects; the 50,000 full sweep alone ~40 s
    "edge_restart": 600,  # 50,000 hand-off files and journal rows, 3 restarts
}
DEFAULT_TIMEOUT = 240
TOTAL_BUDGET = 26 * 60
PACKAGES = [
    "numpy",
    "astropy",
    "fitsio",
    "apache-beam",
    "confluent-kafka",
    "google-cloud-storage",
    "google-cloud-pubsub",
    "fastavro",
    "sqlalchemy",
    "psycopg",
    "matplotlib",
    "lsst-daf-butler",
    "fastapi",
    "uvicorn",
]


def discover() -> list[str]:
    """Names of benchmark modules that define a top-level ``run`` function."""
    names = [path.stem for path in sorted(BENCH.glob("*.py")) if "\ndef run(" in path.read_text()]
    first = [n for n in FIRST if n in names]
    return first + [n for n in names if n not in first]


def ensure_stack() -> dict[str, Any]:
    """``obsingest stack up`` (idempotent); export its endpoints for the benchmarks."""
    from infra.local.stack import Stack

    stack = Stack()
    outcome = stack.up()
    for key, value in stack.env().items():
        os.environ.setdefault(key, value)
    return {"started": outcome.started, "already_running": outcome.already_running}


def stop_started(stack: dict[str, Any]) -> None:
    """Leave no service running that this run started (ones already up stay up)."""
    started = stack.get("started") or []
    if not started:
        return
    from infra.local.stack import Stack

    stopped = Stack().down(names=list(started))
    print(f"stopped the services this run started: {', '.join(stopped)}", file=sys.stderr)


_RUNNER = (
    "import json, sys\n"
    "from importlib import import_module\n"
    "result = import_module('benchmarks.' + sys.argv[1]).run()\n"
    "with open(sys.argv[2], 'w') as fh:\n"
    "    json.dump(result, fh, default=str)\n"
)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_benchmark(name: str, timeout: float) -> dict[str, Any]:
    """Run ``benchmarks.<name>.run()`` in its own process, killed at the timeout; its result,
    or its failure with the tail of its stderr (passed through as it comes)."""
    print(f"\n=== {name} (timeout {timeout:.0f} s) ===", file=sys.stderr, flush=True)
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=30)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER, name, str(out)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its worker processes too: the watchdog kills the group
        )
        watchdog = threading.Timer(timeout, _kill_group, args=(proc,))
        watchdog.start()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                sys.stderr.write(line)
                tail.append(line)
            code = proc.wait()
        finally:
            watchdog.cancel()
        seconds = round(time.monotonic() - started, 1)
        if code == 0:
            error = None
        elif seconds >= timeout:
            error = f"timed out after {timeout:.0f} s"
        else:
            error = f"exit {code}"
        result = json.loads(out.read_text()) if out.exists() and not error else None
    status = "ok" if error is None else f"FAILED ({error})"
    print(f"=== {name}: {status} in {seconds} s ===", file=sys.stderr, flush=True)
    return {"name": name, "seconds": seconds, "error": error, "tail": "".join(tail), "result": result}


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = found[1].strip() if found else cpu
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(mem_gb, 1),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict[str, str]:
    import confluent_kafka

    from infra.local.stack.settings import FAKE_GCS_SERVER_VERSION, KAFKA_VERSION, PSTEST_VERSION

    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["librdkafka"] = confluent_kafka.libversion()[0]
    out["fpack"] = tool_version("fpack", "-V")
    out["kafka"] = KAFKA_VERSION
    out["fake-gcs-server"] = FAKE_GCS_SERVER_VERSION
    out["pstest"] = PSTEST_VERSION
    out["postgresql"] = tool_version("psql", "--version")
    return out


def plot_transfer(result: dict[str, Any], path: Path = PLOT) -> Path | None:
    """Max transfer and max readout -> announced vs CCDs per exposure, ours vs published."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r.get("steady")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    published = sorted((int(k), v["max"]) for k, v in result["published"].items())
    ax.plot(*zip(*published, strict=True), "k--o", label="published: max send (10 Gbit/s WAN)")
    for index, name in enumerate(sorted({r["path"] for r in rows})):
        color = f"C{index}"
        mine = sorted(((r["ccds"], r) for r in rows if r["path"] == name), key=lambda x: x[0])
        xs = [n for n, _ in mine]
        for key, style, what in (("max", "-o", "max read + compress + send"), ("send_max", ":o", "max send")):
            ax.plot(xs, [r["steady"][key] for _, r in mine], style, color=color, label=f"{name}: {what}")
        announced = [(n, r["latency"]["steady"]["max"]) for n, r in mine if r.get("latency")]
        if announced:
            label = f"{name}: max readout -> announced"
            ax.plot(*zip(*announced, strict=True), "--s", color=color, label=label)
    ax.axhline(result["budget_seconds"], color="red", lw=1, label="5 s budget")
    ax.set_xlabel("CCDs per exposure (read out together, through the edge service)")
    ax.set_ylabel("seconds per CCD")
    ax.set_title(f"Transfer harness on {os.cpu_count()} cores vs observatory figures")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _table(rows: list[tuple[str, dict[str, Any]]], first: str) -> list[str]:
    """Markdown table of (label, figures) rows; scalar columns only, at most 10."""
    keys: list[str] = []
    for _, figures in rows:
        keys += [k for k, v in figures.items() if _scalar(v) and k not in keys]
    keys = keys[:10]
    lines = [f"| {first} | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for label, figures in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(figures.get(k, "")) for k in keys) + " |")
    return lines


def generic(result: dict[str, Any]) -> str:
    """Benchmarks without a dedicated section: their scalars, then one table per list of
    records or mapping of records, then the goal."""
    scalars = {k: v for k, v in result.items() if _scalar(v) and k not in ("benchmark", "when", "host")}
    lines = [f"- {k}: {_cell(v)}" for k, v in scalars.items()]
    for key, value in result.items():
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            lines += ["", f"{key}:", "", *_table([(str(i + 1), r) for i, r in enumerate(value)], "#")]
        elif isinstance(value, dict) and value and all(isinstance(r, dict) for r in value.values()):
            lines += ["", f"{key}:", "", *_table(list(value.items()), key)]
    goal = result.get("goal")
    if isinstance(goal, dict) and "met" in goal:
        lines += ["", f"Goal: {'met' if goal['met'] else 'NOT met'}"]
    return "\n".join(lines) or "(no figures)"


def write_readme(runs: list[dict[str, Any]], info: dict[str, Any]) -> None:
    vers = info["versions"]
    mach = info["machine"]
    date = f"- date: {info['date']}"
    if info.get("only"):
        date += (
            f": only {', '.join(info['only'])} re-run ({info['total_seconds']:.0f} s); the others are from "
            "their own runs (dates in the table; machine and versions below are this run's)"
        )
    else:
        date += f" (total {info['total_seconds']:.0f} s)"
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m benchmarks.run_all`); do not edit by hand. Every "
        "figure is from the run below; JSON in `results/`.",
        "",
        date,
        f"- machine: {mach['cpus']} cores, {mach['cpu_model']}, {mach['memory_gib']} GiB, "
        f"{mach['platform']}; load average (1/5/15 min) before {info['load_before']}, after "
        f"{mach['loadavg']} (a shared, noisy machine: medians and same-run ratios matter)",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()),
        f"- local stack: {json.dumps(info['stack'])}",
        "",
        "| benchmark | status | seconds | date |",
        "| --- | --- | ---: | --- |",
    ]
    lines += [f"| {r['name']} | {r['error'] or 'ok'} | {r['seconds']} | {r.get('date', '-')} |" for r in runs]
    for r in runs:
        lines += ["", f"## {r['name']}", ""]
        if r["result"] is None:
            tail = (r["tail"] or "").strip().splitlines()[-8:]
            lines += [f"Failed: {r['error']}.", "", "```", *tail, "```"]
            continue
        lines.append(
            getattr(import_module(f"benchmarks.{r['name']}"), "format_section", generic)(r["result"])
        )
    # sections written by harnesses that are not benchmarks here (make soak: results/soak.md)
    for extra in sorted(RESULTS.glob("*.md")):
        lines += ["", f"## {extra.stem}", "", extra.read_text().strip()]
    lines += ["", "## Measurement history", "", note("history").strip()]
    README.write_text("\n".join(lines).rstrip() + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, or only those named in ``argv``; write the README from the records."""
    only = list(sys.argv[1:] if argv is None else argv)
    names = discover()
    unknown = sorted(set(only) - set(names))
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        stack = ensure_stack()
    except Exception as exc:  # the benchmarks that need it will fail and say so
        stack = {"error": str(exc)}
        print(f"local stack not available: {exc}", file=sys.stderr)
    kept: dict[str, dict[str, Any]] = {}  # the last run's record of every benchmark, if readable
    if only:
        with contextlib.suppress(OSError, ValueError):
            kept = dict(json.loads(RECORDS.read_text()))
    runs = []
    for name in names:
        if only and name not in only:
            if name in kept:
                runs.append(kept[name])
            continue
        remaining = TOTAL_BUDGET - (time.monotonic() - t0)
        if remaining < 30:
            skipped = {"seconds": 0, "error": "skipped: out of time budget", "tail": "", "result": None}
            runs.append({"name": name, **skipped})
            continue
        run = run_benchmark(name, min(TIMEOUTS.get(name, DEFAULT_TIMEOUT), remaining))
        run["date"] = datetime.now(UTC).isoformat(timespec="seconds")
        runs.append(run)
    transfer = next((r["result"] for r in runs if r["name"] == "transfer" and r["result"]), None)
    if transfer and (not only or "transfer" in only):
        plot_transfer(transfer)
    info = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "stack": stack,
        "load_before": load_before,
        "total_seconds": time.monotonic() - t0,
        "only": only,
    }
    RECORDS.write_text(json.dumps({r["name"]: r for r in runs}, indent=1) + "\n")
    write_readme(runs, info)
    print(f"\nwritten {README}", file=sys.stderr)
    stop_started(stack)
    ran = [r for r in runs if not only or r["name"] in only]
    return 0 if all(r["error"] is None for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
