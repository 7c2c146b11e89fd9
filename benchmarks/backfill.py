"""Backfill throughput: ``--parallel`` sweep, files/s and Gbit/s against N, next to Google's own
parallel uploader (``transfer_manager.upload_many_from_filenames``, worker processes) on the same
files in the same run, to the GCS emulator. Ours also journals, uploads create-once and verifies;
transfer_manager only uploads. Tools alternate per repeat; ratios are of same-repeat runs.
"""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import cli, drop_bucket, fresh_bucket, gcs_client, note, run_header, save_result

FILES = 1000
FILE_BYTES = 64 * 1024
PARALLEL = (1, 2, 4, 8)
#: runs per (tool, N), order alternating; medians reported (3: a median of 2 is their mean)
REPEATS = 3


def make_archive(root: Path, files: int, size: int) -> list[Path]:
    """``files`` camera files of about ``size`` bytes under names that say nothing (the backfill
    names each from its header's identity cards), each one image of random bytes."""
    from obsingest.dataid import DataId, identity_cards, make_exposure_id
    from obsingest.fits import header_bytes, make_card, padded

    rng = random.Random(1)
    paths = []
    for i in range(files):
        identity = DataId("LSSTCam", make_exposure_id(20250415, i // 205 + 1), i % 205).identity()
        primary = {"SIMPLE": True, "BITPIX": 8, "NAXIS": 0, "EXTEND": True, **identity_cards(identity)}
        n = max(1, size - 3 * 2880)
        image = {"XTENSION": "IMAGE", "BITPIX": 8, "NAXIS": 1, "NAXIS1": n, "PCOUNT": 0, "GCOUNT": 1}
        path = root / f"{i % 10:02d}" / f"file-{i:05d}.fits"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(n)
        headers = [header_bytes([make_card(k, v) for k, v in cards.items()]) for cards in (primary, image)]
        path.write_bytes(b"".join(headers) + data + bytes(padded(n) - n))
        paths.append(path)
    return paths


def ours(root: Path, bucket: str, parallel: int) -> float:
    from producers.backfill import BackfillConfig, run_backfill

    spool = Path(tempfile.mkdtemp(prefix="bench-backfill-spool-"))
    try:
        started = time.monotonic()
        report = run_backfill(
            BackfillConfig([str(root)], f"gs://{bucket}/archive", spool, parallel=parallel, progress=False)
        )
        seconds = time.monotonic() - started
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    if report.failed or report.verified != FILES:
        raise RuntimeError(f"backfill: {len(report.failed)} failed, {report.verified} verified")
    return seconds


def google(root: Path, paths: list[Path], client: Any, bucket: str, parallel: int) -> float:
    from google.cloud.storage import transfer_manager

    names = [str(p.relative_to(root)) for p in paths]
    started = time.monotonic()
    results = transfer_manager.upload_many_from_filenames(
        client.bucket(bucket),
        names,
        source_directory=str(root),
        blob_name_prefix="archive/",
        max_workers=parallel,
        worker_type=transfer_manager.PROCESS,
    )
    seconds = time.monotonic() - started
    errors = [r for r in results if isinstance(r, Exception)]
    if errors:
        raise RuntimeError(f"transfer_manager: {len(errors)} failed: {errors[0]!r}")
    return seconds


def _once(tool: str, root: Path, paths: list[Path], client: Any, n: int) -> float:
    """Seconds for one whole-archive run of ``tool`` at ``--parallel n`` into a fresh bucket."""
    print(f"backfill benchmark: {tool}, --parallel {n} ...", file=sys.stderr)
    bucket = fresh_bucket(client, f"bench-backfill-{tool[:6]}")
    try:
        seconds = ours(root, bucket, n) if tool == "obsingest" else google(root, paths, client, bucket, n)
    finally:
        stored = drop_bucket(client, bucket)
    if stored != len(paths):
        raise RuntimeError(f"{tool}: {stored} objects in the bucket, not {len(paths)}")
    return seconds


def run(
    files: int = FILES, size: int = FILE_BYTES, parallel: tuple[int, ...] = PARALLEL, repeats: int = REPEATS
) -> dict[str, Any]:
    from obsingest_cli.demo.local_stack import use_stack_environment

    use_stack_environment(("gcs", "pubsub"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    client = gcs_client()
    rows = []
    tools = ("transfer_manager", "obsingest")
    try:
        paths = make_archive(tmp / "archive", files, size)
        total = files * size
        for i, n in enumerate(parallel):
            row: dict[str, Any] = {"parallel": n}
            seconds: dict[str, list[float]] = {tool: [] for tool in tools}
            for rep in range(repeats):
                order = tools if (i + rep) % 2 == 0 else tools[::-1]
                for tool in order:
                    seconds[tool].append(_once(tool, tmp / "archive", paths, client, n))
            for tool in tools:
                median = statistics.median(seconds[tool])
                runs = [round(files / s, 1) for s in seconds[tool]]
                row[tool] = {
                    "seconds": round(median, 3),
                    "files_s": round(files / median, 1),
                    "gbit_s": round(total * 8 / 1e9 / median, 4),
                    "runs_files_s": runs,
                }
            # ours/theirs in files/s = their seconds / ours, per repeat (same load), median
            pairs = zip(seconds["obsingest"], seconds["transfer_manager"], strict=True)
            row["ratio"] = round(statistics.median(t / o for o, t in pairs), 3)
            rows.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        **run_header("backfill"),
        "files": files,
        "file_bytes": size,
        "destination": "GCS emulator (fake-gcs-server, local stack)",
        "ours": "obsingest backfill: journal + create-once upload + CRC32C/size verification",
        "reference": "google.cloud.storage.transfer_manager.upload_many_from_filenames "
        "(worker_type=PROCESS): upload only",
        "repeats": repeats,
        "order": "alternating per repeat and per N; medians, ratio = median of same-repeat ratios",
        "rows": rows,
        "what_moved": note("backfill"),
        "goal": {
            "what": "obsingest backfill at least transfer_manager's files/s at every --parallel",
            "met": all(r["ratio"] >= 1.0 for r in rows),
            "best_ratio": max(r["ratio"] for r in rows),
            "worst_ratio": min(r["ratio"] for r in rows),
        },
    }
    save_result("backfill", result)
    return result


def format_section(result: dict[str, Any]) -> str:
    lines = [
        f"{result['files']:,} files of {result['file_bytes']:,} bytes to the "
        f"{result['destination']}, a fresh bucket per run. Ours: {result['ours']}. Reference, "
        f"same files, same run: {result['reference']}.",
        "",
        "| --parallel | obsingest files/s | obsingest Gbit/s | transfer_manager files/s "
        "| transfer_manager Gbit/s | ours / theirs |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        o, t = r["obsingest"], r["transfer_manager"]
        lines.append(
            f"| {r['parallel']} | {o['files_s']:,.1f} | {o['gbit_s']:.3f} "
            f"| {t['files_s']:,.1f} | {t['gbit_s']:.3f} | {r['ratio']:.2f}x |"
        )
    goal = result["goal"]
    lines += [
        "",
        f"Goal ({goal['what']}): {'met' if goal['met'] else 'NOT met'} (ratio "
        f"{goal['worst_ratio']:.2f}x .. {goal['best_ratio']:.2f}x)",
    ]
    if result.get("what_moved"):
        lines += ["", "What moved the figures:", "", result["what_moved"].rstrip()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(run, format_section))
