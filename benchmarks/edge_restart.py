"""How long a restarted edge takes to be ready when its hand-off directory keeps 50,000 CCDs it
has already acknowledged (``--on-ack keep``), the first scan included (goal, issue 24: under 5 s);
beside it, a journal without the files' mtime and size: every file journalled again.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import cli, run_header, save_result

FILES = 50_000
UNKNOWN_FILES = 5_000
REPEATS = 5
DETECTORS = 205
DAY_OBS = 20261122
GOAL_SECONDS = 5.0


def header(exposure: int, detector: int) -> bytes:
    """The camera's primary header for this CCD and no data (the edge reads a file's identity
    from its header, never from its name)."""
    from obsingest.dataid import DataId, identity_cards
    from obsingest.fits import header_bytes, make_card

    cards = {
        "SIMPLE": True,
        "BITPIX": 8,
        "NAXIS": 0,
        **identity_cards(DataId("LSSTCam", exposure, detector).identity("O")),
    }
    return header_bytes([make_card(k, v) for k, v in cards.items()])


def fill(handoff: Path, spool: Path, files: int, known: bool) -> None:
    """``files`` hand-off files and an acked journal row each (with mtime and size if ``known``)."""
    from producers.edge.journal import Entry, Journal

    entries = []
    now = time.time()
    for n in range(files):
        exposure = DAY_OBS * 100_000 + 1 + n // DETECTORS
        detector = n % DETECTORS
        folder = handoff / str(DAY_OBS) / str(exposure)
        if detector == 0:
            folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"LSSTCam_{exposure}_{detector:03d}.fits"
        path.write_bytes(header(exposure, detector))
        st = path.stat()
        entries.append(
            Entry(
                key=f"LSSTCam/{exposure}/{detector:03d}",
                source=str(path),
                state="acked",
                priority=exposure,
                readout=now,
                status="stored",
                acked_at=now,
                source_mtime=st.st_mtime if known else None,
                source_size=st.st_size if known else None,
            )
        )
    journal = Journal(spool)
    journal.add_many(entries)
    journal.close()


def restart(root: Path) -> dict[str, Any]:
    """One restart: seconds until ready, and what the edge counted meanwhile."""
    from producers.edge import EdgeService, EdgeSettings

    settings = EdgeSettings(
        destination=f"file://{root / 'store'}",
        spool=root / "spool",
        handoff=root / "handoff",
        health_port=-1,
        min_free_bytes=0,
    )
    started, cpu = time.perf_counter(), time.process_time()
    edge = EdgeService(settings, log_level="WARNING").start()
    ready = time.perf_counter() - started
    cpu = time.process_time() - cpu
    try:
        assert edge.state == "ready", edge.state
        stats = edge.counts()
    finally:
        edge.stop()
    return {
        "ready_s": ready,
        "cpu_s": cpu,
        "accepted": stats["accepted"],
        "duplicates": stats["duplicates"],
        "quarantined": sum(stats["quarantined"].values()),
    }


def scan_only(root: Path) -> tuple[float, float]:
    """The part of a restart that grows with the hand-off directory, alone: (wall, CPU) seconds."""
    from producers.edge.handoff import HandoffIntake
    from producers.edge.journal import Journal

    wall, cpu = time.perf_counter(), time.process_time()
    journal = Journal(root / "spool")
    intake = HandoffIntake(root / "handoff", lambda _found: True, known=journal.handed_off())
    intake.scan()
    journal.close()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(files: int, known: bool, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-edge-restart-") as tmp:
        root = Path(tmp)
        fill(root / "handoff", root / "spool", files, known)
        load = [round(os.getloadavg()[0], 2)]
        runs = [restart(root) for _ in range(repeats)]
        load.append(round(os.getloadavg()[0], 2))
        scans = [scan_only(root) for _ in range(repeats)] if known else [(0.0, 0.0)]
    ready = [r["ready_s"] for r in runs]
    return {
        "files": files,
        "journal_knows_mtime_size": known,
        "ready_s_median": round(statistics.median(ready), 3),
        "ready_s_max": round(max(ready), 3),
        "ready_s_all": [round(r, 3) for r in ready],
        "ready_main_cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 3),
        "load_1min_before_after": load,
        "per_file_ms": round(statistics.median(ready) / files * 1000, 4),
        "scan_wall_s_median": round(statistics.median(w for w, _ in scans), 3),
        "scan_cpu_s_median": round(statistics.median(c for _, c in scans), 3),
        "accepted": runs[-1]["accepted"],
        "duplicates": runs[-1]["duplicates"],
        "quarantined": runs[-1]["quarantined"],
        "repeats": repeats,
    }


def run(files: int = FILES, repeats: int = REPEATS) -> dict[str, Any]:
    print(f"edge restart benchmark: {files:,} acknowledged files ...", file=sys.stderr)
    known = measure(files, True, repeats)
    unknown_files = min(files, UNKNOWN_FILES)
    print(f"edge restart benchmark: {unknown_files:,}, journal without mtime ...", file=sys.stderr)
    unknown = measure(unknown_files, False, 1)
    result = {
        **run_header("edge_restart"),
        "what": "restart -> ready of the edge service (journal opened, workers started, the "
        "hand-off directory scanned) with acknowledged CCDs kept in its hand-off directory",
        "cpus": os.cpu_count(),
        "rows": [known, unknown],
        "goal": f"ready in under {GOAL_SECONDS:g} s with {files:,} acknowledged files",
        "goal_met": known["ready_s_median"] < GOAL_SECONDS,
    }
    save_result("edge_restart", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    lines = [
        result["what"] + ". " + ("Goal met" if result["goal_met"] else "Goal NOT met") + ": "
        f"{result['goal']} (median of the repeats). The second row is the edge before it "
        "skipped what its journal knows: every kept file read for its header and journalled "
        "again as a duplicate. The part that grows with the directory (the journal's finished "
        "files read, the directory scanned) is measured alone in the last column; the 2 worker "
        "processes (forkserver, heavy imports) start while it runs, so a restart costs the "
        "longer of the two, which the machine's load stretches (1-min load before/after).",
        "",
        "| acknowledged files | journal knows mtime+size | restart -> ready s (median, max) "
        "| main process CPU s | per file ms | offered again as duplicates | load | "
        "of which journal + scan: wall s, CPU s |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['files']:,} | {'yes' if row['journal_knows_mtime_size'] else 'no'} | "
            f"{row['ready_s_median']:.2f}, {row['ready_s_max']:.2f} | "
            f"{row.get('ready_main_cpu_s_median', 0):.2f} | {row['per_file_ms']:.3f} "
            f"| {row['duplicates']:,} | {row.get('load_1min_before_after')} | "
            f"{row['scan_wall_s_median']:.2f}, {row['scan_cpu_s_median']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run, format_section))
