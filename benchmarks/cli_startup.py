"""How long a person waits for the command line: ``obsingest --help`` and every subcommand's
``--help`` as whole processes, next to ``python -c pass``, medians of round-robin repeats.
Goal (issue 16): every one under 0.25 s wall on this machine.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import cli, run_header, save_result

GOAL_SECONDS = 0.25


def commands() -> dict[str, list[str]]:
    """label -> argv of every measured process."""
    from obsingest_cli.main import COMMAND_MODULES

    exe = shutil.which("obsingest", path=str(Path(sys.executable).parent)) or "obsingest"
    out = {"python -c pass": [sys.executable, "-c", "pass"], "obsingest --help": [exe, "--help"]}
    for name in COMMAND_MODULES:
        out[f"obsingest {name} --help"] = [exe, name, "--help"]
    return out


def _time(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def run(repeats: int = 15) -> dict[str, Any]:
    cmds = commands()
    samples: dict[str, list[float]] = {label: [] for label in cmds}
    for argv in cmds.values():  # warm the page cache and .pyc files once
        _time(argv)
    for _ in range(repeats):
        for label, argv in cmds.items():
            samples[label].append(_time(argv))
    rows = {
        label: {
            "median_s": round(statistics.median(s), 4),
            "min_s": round(min(s), 4),
            "max_s": round(max(s), 4),
        }
        for label, s in samples.items()
    }
    worst = max(v["median_s"] for k, v in rows.items() if k.startswith("obsingest"))
    result = {
        **run_header("cli_startup"),
        "repeats": repeats,
        "interpreter_median_s": rows["python -c pass"]["median_s"],
        "worst_help_median_s": worst,
        "commands": rows,
        "goal": {
            "what": f"every `obsingest ... --help` under {GOAL_SECONDS} s (median)",
            "met": worst < GOAL_SECONDS,
        },
    }
    save_result("cli_startup", result)
    return result


if __name__ == "__main__":
    sys.exit(cli(run))
