"""Ingest every obs_lsst test header under its camera file name and compare what is registered
with Rubin's translator, field by field.

    python -m tests.world.ingest_obs_lsst --obs-lsst DIR [--work DIR] [--verbose]

``check_obs_lsst`` compares translations; this goes one step further, as issue 19 asks: each of
the LSSTCam, LSSTComCam and LATISS headers of the checkout's ``tests/headers/`` (the selection of
``check_obs_lsst``) is written as a FITS file under the camera's own name
(``MC_O_20240625_000019_R22_S11.fits``, from obs_lsst's observation id and detector) and goes in
two ways, on the embedded environment (local directory store, SQLite registry, in-process bus:
no services):

- edge: ``EdgeService`` watching a hand-off directory, uploading to the store; the store's
  finalize outbox is delivered to the register function, which writes the registry;
- backfill: ``python -m producers.backfill`` into a store nobody is notified of, then
  ``python -m obsingest_cli reconcile``, which finds the objects and registers them.

Two headers of the checkout describe the same CCD (``latiss-AT_O_20240624_000106_R00_S00`` and
its ``-patched`` version): the store keeps the first, the second is reported and not compared
(backfill refuses it as ``checksum-conflict``; the edge's journal, keyed by data id, takes it
for a second hand-off of a CCD already sent and leaves it in the hand-off directory). Then the
registered exposure record and dataset (data id) of each header are compared with
obs_lsst's ObservationInfo (times as UTC instants: obs_lsst's TAI converted). Prints a table and
the totals; exit 1 when a header is not ingested or a field differs. Not collected by pytest (a
local verification against a checkout this repository does not ship).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.world.check_obs_lsst import headers, load_oracle, read_header
from tests.world.oracle_fields import UNDEFINED, expected_fields, oracle_bands

ROOT = Path(__file__).resolve().parents[2]
#: instants compared to this many seconds (the registry keeps microseconds)
TIME_TOLERANCE = 1e-6
#: floating fields compared to this relative precision (REAL columns round-trip exactly; kept
#: for the unit conversions)
FLOAT_TOLERANCE = 1e-12


def camera_name(info: Any) -> str:
    """The camera's file name of the CCD obs_lsst describes (LATISS writes ``R00_S00``)."""
    raft = "R00" if info.instrument == "LATISS" else info.detector_group
    return f"{info.observation_id}_{raft}_{info.detector_name}.fits"


def build_files(checkout: Path, corrections: list[str]) -> list[dict[str, Any]]:
    """Every selected header with obs_lsst's ObservationInfo, its camera name and FITS bytes."""
    from astro_metadata_translator import ObservationInfo

    from tests.fixtures.camera_files import fits_from_cards

    oracle = load_oracle(checkout)
    cases = []
    for path in headers(checkout):
        header = read_header(path)
        cls = next(c for c in oracle.values() if c.can_translate(header))
        info = ObservationInfo(copy.deepcopy(header), translator_class=cls, search_path=corrections)
        name = camera_name(info)
        cases.append({"header": path.name, "info": info, "name": name, "data": fits_from_cards(header)})
    return cases


def place(cases: list[dict[str, Any]], root: Path, rename: bool) -> None:
    """Write every case's file under its camera name; a name met twice goes into its own
    sub-directory (same CCD, another header: the registry keeps the first)."""
    seen: dict[str, int] = {}
    for case in cases:
        n = seen[case["name"]] = seen.get(case["name"], 0) + 1
        folder = root if n == 1 else root / f"again-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / case["name"]
        if rename:  # as the DAQ hands over: a temporary name, then the final one
            tmp = folder / f".{case['name']}.part"
            tmp.write_bytes(case["data"])
            tmp.rename(path)
        else:
            path.write_bytes(case["data"])


def through_edge(cases: list[dict[str, Any]], work: Path, timeout: float) -> tuple[Any, list]:
    """The edge into the embedded environment; (registry, edge quarantine reasons)."""
    from obsingest_cli.demo.embedded import EmbeddedEnvironment
    from producers.edge import EdgeService, EdgeSettings

    work.mkdir(parents=True)
    env = EmbeddedEnvironment(work)
    env.start(lambda _arrival: None, None)
    handoff = work / "handoff"
    handoff.mkdir(parents=True)
    settings = EdgeSettings(
        destination=env.store_url,
        prefix=env.store_settings.prefix,
        quarantine_prefix=env.store_settings.quarantine_prefix,
        spool=work / "edge-spool",
        handoff=handoff,
        workers=1,
        health_port=-1,
        min_free_bytes=0,
        rescan_interval=1.0,
    )
    with EdgeService(settings, log_level="WARNING") as edge:
        place(cases, handoff / "night", rename=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            refused = list((handoff / "quarantine").rglob("*.reason.json"))
            done = env.registry.count_datasets() + len(env.registry.quarantined()) + len(refused)
            if done >= len({c["name"] for c in cases}) and edge.wait_idle(1.0):
                break
            time.sleep(0.5)
        edge.wait_idle(30.0)
    env.finish(timeout=60)
    reasons = [
        json.loads(p.read_text()) | {"file": p.name.removesuffix(".reason.json")}
        for p in (handoff / "quarantine").rglob("*.reason.json")
    ]
    return env, reasons


def through_backfill(cases: list[dict[str, Any]], work: Path) -> tuple[Any, dict[str, Any]]:
    """``backfill`` into a local store nobody is notified of, then ``reconcile``."""
    from obsingest.registry import Registry
    from obsingest.settings import RegistrySettings

    archive, store = work / "archive", work / "store"
    store.mkdir(parents=True)
    place(cases, archive / "2024" / "night 1", rename=False)
    registry_url = f"sqlite:///{work / 'registry.sqlite3'}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OBSINGEST_STORE_URL": f"file://{store}",
        "OBSINGEST_REGISTRY_URL": registry_url,
        "OBSINGEST_BUS_BACKEND": "memory",
    }
    report = work / "backfill.json"
    run = [
        sys.executable,
        "-m",
        "producers.backfill",
        str(archive),
        "--to",
        f"file://{store}",
        "--prefix",
        "raw/",
        "--spool",
        str(work / "spool"),
        "--no-progress",
        "--parallel",
        "2",
        "--json",
        str(report),
    ]
    backfill = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    found = json.loads(report.read_text()) if report.exists() else {}
    found["returncode"] = backfill.returncode
    found["stderr"] = backfill.stderr[-2000:]
    run = [sys.executable, "-m", "obsingest_cli", "reconcile", "--grace", "0", "--no-repair", "--json"]
    reconcile = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    found["reconcile"] = {
        "returncode": reconcile.returncode,
        "out": reconcile.stdout[-2000:],
        "err": reconcile.stderr[-2000:],
    }
    return Registry.open(RegistrySettings(url=registry_url)), found


def registered_fields(registry: Any, info: Any) -> dict[str, Any] | None:
    """The registered record of the CCD ``info`` describes, in ``expected_fields``'s terms."""
    instrument, exposure = info.instrument, info.exposure_id
    record = registry.exposure(instrument, exposure)
    rows = [d for d in registry.datasets(instrument, exposure) if d["detector"] == info.detector_num]
    if record is None or not rows:
        return None
    out = {
        "instrument": rows[0]["instrument"],
        "exposure": rows[0]["exposure"],
        "detector": rows[0]["detector"],
    }
    for key in (
        "obs_id",
        "group_name",
        "day_obs",
        "seq_num",
        "physical_filter",
        "band",
        "exposure_time",
        "dark_time",
        "observation_type",
        "observation_reason",
        "science_program",
        "target_name",
        "sky_angle",
        "can_see_sky",
        "has_simulated",
        "tracking_ra",
        "tracking_dec",
        "azimuth",
        "zenith_angle",
    ):
        out[key] = record.get(key)
    for key in ("obs_start", "obs_end"):
        value = record.get(key)
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)  # SQLite keeps the UTC instant without its zone
        out[key] = value
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return abs((a - b).total_seconds()) <= TIME_TOLERANCE
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= FLOAT_TOLERANCE * max(abs(a), abs(b), 1.0)
    return a == b


def compare(registry: Any, cases: list[dict[str, Any]], bands: dict[str, str]) -> list[dict]:
    """Per case: ingested or not, and [(field, ours, obs_lsst)] of what differs."""
    results = []
    first: dict[str, str] = {}
    for case in cases:
        if case["name"] in first:  # another header of a CCD met before: the store keeps one
            results.append(
                {"case": case, "ingested": False, "diffs": [], "duplicate_of": first[case["name"]]}
            )
            continue
        first[case["name"]] = case["header"]
        want = expected_fields(case["info"], bands)
        got = registered_fields(registry, case["info"])
        if got is None:
            results.append({"case": case, "ingested": False, "diffs": []})
            continue
        note = None
        if want["band"] == UNDEFINED:  # obs_lsst defines no band: nothing to compare with
            note = f"band {got['band']!r}: physical filter {want['physical_filter']!r} {UNDEFINED}"
            want.pop("band")
        diffs = [(k, got[k], v) for k, v in want.items() if not same(got[k], v)]
        results.append({"case": case, "ingested": True, "diffs": diffs, "note": note})
    return results


def report(path_name: str, results: list[dict], refused: dict[str, str]) -> tuple[int, int]:
    """Print one path's table; (ingested, differing fields)."""
    print(f"\n== {path_name}")
    print(f"{'header':50} {'camera file':36} {'ingested':>8} {'differing':>9}")
    ingested = differing = duplicates = 0
    for r in results:
        case = r["case"]
        ingested += r["ingested"]
        differing += len(r["diffs"])
        mark = "yes" if r["ingested"] else "NO"
        print(f"{case['header']:50} {case['name']:36} {mark:>8} {len(r['diffs']):>9}")
        if r.get("note"):
            print(f"    not compared: {r['note']}")
        if r.get("duplicate_of"):
            print(f"    same CCD as {r['duplicate_of']} (registered): not compared")
            duplicates += 1
        if not r["ingested"] and case["name"] in refused:
            print(f"    refused: {refused[case['name']]}")
        for field, ours, theirs in r["diffs"]:
            print(f"    {field}: ours {ours!r} != obs_lsst {theirs!r}")
    print(
        f"{path_name}: ingested {ingested}/{len(results)} ({len(results) - duplicates} distinct"
        f" CCDs), {differing} differing fields"
    )
    return ingested, differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--obs-lsst", required=True, type=Path, help="an obs_lsst checkout")
    parser.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=300.0, help="edge wait, seconds")
    parser.add_argument("--verbose", action="store_true", help="log the translators' warnings")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
    corrections = [str(args.obs_lsst.resolve() / "corrections")]
    # the register function and reconcile translate with the checkout's corrections, as ours do
    os.environ["OBSINGEST_HEADER_CORRECTIONS"] = os.pathsep.join(corrections)
    from obsingest import translate

    translate.configure(corrections)
    cases = build_files(args.obs_lsst, corrections)
    bands = oracle_bands(args.obs_lsst)
    work = args.work or Path(tempfile.mkdtemp(prefix="obsingest-world-"))
    if work.exists() and args.work:
        shutil.rmtree(work)
    totals = []
    env, reasons = through_edge(cases, work / "edge", args.timeout)
    try:
        refused = {r["file"]: f"{r.get('reason')}: {r.get('error')}" for r in reasons}
        for q in env.registry.quarantined():
            refused[Path(q["object_uri"]).name] = f"{q['reason']}: {q['message']}"
        totals.append(("edge", *report("edge", compare(env.registry, cases, bands), refused)))
    finally:
        env.close()
    registry, found = through_backfill(cases, work / "backfill")
    try:
        refused = {Path(k).name: v for k, v in found.get("failed", {}).items()}
        for q in registry.quarantined():
            refused[Path(q["object_uri"]).name] = f"{q['reason']}: {q['message']}"
        if found["returncode"] or found["reconcile"]["returncode"]:
            print(f"\nbackfill rc {found['returncode']}, reconcile {found['reconcile']}")
        totals.append(
            (
                "backfill + reconcile",
                *report("backfill + reconcile", compare(registry, cases, bands), refused),
            )
        )
    finally:
        registry.close()
    print()
    for name, ingested, differing in totals:
        print(f"{name}: ingested {ingested}/{len(cases)}, {differing} differing fields")
    bad = any(i < len(cases) or d for _n, i, d in totals)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
