"""Running many scenarios: one after another on one set of services (``make chaos``), or in lanes
side by side (the reduced suite of ``make test``).

Most of a fault scenario is waiting: a minute's outage, a reconcile pass every 30 s, a canary
judged after 30 s. Those scenarios share the machine well, so the reduced suite runs them in
lanes beside the one lane of scenarios that keep the CPU busy (hundreds of CCDs through the edge,
PostgreSQL crashed under load, Kafka), which run one at a time. Each lane is a process of its
own (``python -m tests.chaos --serial ...``) with services of its own: Google's clients take
their endpoints from the environment, so two lanes never share a process, and a restart or a
crash in one lane never touches another.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.chaos.runner import Scenario

ROOT = Path(__file__).resolve().parents[2]

#: seconds an interrupted lane is given to stop its world and services
LANE_TEARDOWN = 60.0

#: the reduced suite: the first lane is busy, the others mostly wait
REDUCED_LANES: tuple[tuple[str, ...], ...] = (
    ("edge-sigkill", "postgres-crash", "kafka", "store-link-down"),
    ("function-outage-60s", "spool-full"),
    ("arrivals-topic-outage-60s", "function-sigkill-butler"),
    ("gcs-restart", "gcs-rate-limit-storm"),
    ("pubsub-restart", "redelivery-storm-butler"),
)


def lanes_for(scenarios: list[Scenario]) -> list[list[str]]:
    """The names of ``scenarios`` arranged in the reduced suite's lanes (others: a lane each)."""
    left = [s.name for s in scenarios]
    lanes = [[n for n in lane if n in left] for lane in REDUCED_LANES]
    listed = {n for lane in lanes for n in lane}
    lanes += [[n] for n in left if n not in listed]
    return [lane for lane in lanes if lane]


def prefetch() -> None:
    """Every artefact a lane starts, fetched here once and side by side before the lanes start
    (on a cold cache Maven waits on the network while Go compiles the emulators and toxiproxy);
    the lanes then find them in the cache."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from infra.local.stack import Stack, load_settings
    from tests.integration.fixtures.toxiproxy import toxiproxy_binary

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: list[Future[Any]] = [
            pool.submit(Stack(load_settings()).fetch),
            pool.submit(toxiproxy_binary),
        ]
        for future in futures:
            future.result()


def run_lanes(
    lanes: list[list[str]], seed: int, workdir: Path, reduced: bool, timeout: float = 1500
) -> list[dict[str, Any]]:
    """Every lane as its own process, all at once; the rows of every scenario (a lane that
    died or hung gives a failed row for each scenario it did not report)."""
    workdir.mkdir(parents=True, exist_ok=True)
    prefetch()
    procs = []
    for i, lane in enumerate(lanes):
        out = workdir / f"lane-{i}.json"
        argv = [
            sys.executable,
            "-m",
            "tests.chaos",
            "--serial",
            "--seed",
            str(seed),
            "--no-doc",
            "--json",
            str(out),
            "--workdir",
            str(workdir / f"lane-{i}"),
            "--only",
            *lane,
        ] + (["--reduced"] if reduced else [])
        log = (workdir / f"lane-{i}.log").open("wb")
        procs.append((lane, out, log, subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)))
    deadline = time.monotonic() + timeout
    try:
        for *_, proc in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    except BaseException:  # interrupted: each lane stops what it started before this ends
        for *_, proc in procs:
            proc.terminate()
        for *_, proc in procs:
            try:
                proc.wait(timeout=LANE_TEARDOWN)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise
    rows: list[dict[str, Any]] = []
    for lane, out, log, proc in procs:
        log.close()
        got = json.loads(out.read_text())["scenarios"] if out.exists() else []
        rows += got
        reported = {r["scenario"] for r in got}
        for name in lane:
            if name not in reported:
                rows.append(_missing(name, seed, reduced, proc.returncode, Path(log.name)))
    return rows


def _missing(name: str, seed: int, reduced: bool, code: int | None, log: Path) -> dict[str, Any]:
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    return {
        "scenario": name,
        "what": "",
        "faults": [],
        "sent": 0,
        "bad_sent": 0,
        "registered_once": 0,
        "announced": 0,
        "lost": 0,
        "doubled": 0,
        "duplicate_announcements": 0,
        "quarantined": {},
        "unaccounted": 0,
        "recovered": False,
        "settle_seconds": None,
        "passed": False,
        "seed": seed,
        "reduced": reduced,
        "failures": [f"its lane exited {code} without reporting it; lane log {log}:\n{tail}"],
        "events": [],
        "logs": str(log),
    }
