"""``python -m tests.chaos`` (``make chaos``): every scenario, one after the other, on services of
the suite's own; prints each scenario's count as it ends and writes the table into
docs/reliability.md. Exit code 1 if any scenario failed.

    python -m tests.chaos                      # every scenario, a fresh random seed
    python -m tests.chaos --seed 1234          # replay a run: the same faults at the same moments
    python -m tests.chaos --only kafka spool-full
    python -m tests.chaos --reduced            # make test's reduced suite, in lanes side by side
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seed", type=int, help="replay this seed (default: a random one)")
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", help="run only these")
    parser.add_argument(
        "--reduced", action="store_true", help="the reduced nights of make test (in lanes unless --serial)"
    )
    parser.add_argument(
        "--serial", action="store_true", help="one scenario after another in this process (make chaos does)"
    )
    parser.add_argument(
        "--no-doc", action="store_true", help="leave docs/reliability.md alone (also with --only, --reduced)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--workdir", type=Path, help="where worlds live (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from tests.sigterm import interrupt_on_sigterm

    interrupt_on_sigterm()
    from tests.chaos import reliability_doc
    from tests.chaos.scenarios import SCENARIOS, by_name, reduced

    if args.list:
        for s in SCENARIOS:
            size = f"{s.night.ccds} CCDs" + (f", reduced {s.reduced.ccds}" if s.reduced else "")
            print(f"{s.name:28} {size:24} {s.what}")
        return 0
    scenarios = by_name(args.only) if args.only else (reduced() if args.reduced else list(SCENARIOS))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stdout)
    logging.getLogger("obsingest.chaos").setLevel(logging.INFO)
    print(f"chaos seed: {seed} (replay: python -m tests.chaos --seed {seed})", flush=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="obsingest-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started, began = datetime.now(UTC), time.monotonic()
    if args.reduced and not args.serial:
        from tests.chaos.suite import lanes_for, run_lanes

        lanes = lanes_for(scenarios)
        print(f"lanes side by side: {lanes}; lane logs in {workdir}", flush=True)
        rows = run_lanes(lanes, seed, workdir, reduced=True)
        for row in rows:
            _print(row)
    else:
        rows = serial(scenarios, seed, workdir, args.reduced)
    seconds = time.monotonic() - began
    print("\n" + reliability_doc.table(rows))
    print(f"seed {seed}; {sum(r['sent'] for r in rows)} CCDs in {seconds / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps({"seed": seed, "scenarios": rows}, indent=1) + "\n")
    if not (args.no_doc or args.only or args.reduced):  # the doc shows whole runs only
        reliability_doc.write(rows, seed, started, seconds)
        print(f"wrote {reliability_doc.DOC.relative_to(reliability_doc.ROOT)}")
    failed = [r["scenario"] for r in rows if not r["passed"]]
    if failed or args.keep or args.workdir:
        print(f"logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def serial(scenarios: list[Any], seed: int, workdir: Path, reduced: bool) -> list[dict[str, Any]]:
    """One scenario after another, on one set of private services (Kafka only if needed)."""
    from tests.chaos.runner import SERVICES, run_scenario, stop_stack, summary
    from tests.integration.fixtures.private_stack import PrivateStack

    stack = PrivateStack(SERVICES).up()
    kafka = PrivateStack(["kafka"]).up(timeout=180) if any(s.kafka for s in scenarios) else None
    rows = []
    try:
        for scenario in scenarios:
            t0 = time.monotonic()
            print(f"\n=== {scenario.name}: {scenario.what}", flush=True)
            run = run_scenario(
                scenario, seed, workdir / scenario.name, reduced=reduced, stack=stack, kafka=kafka
            )
            row = summary(run)
            row["seconds"] = round(time.monotonic() - t0)
            rows.append(row)
            _print(row)
    finally:
        problems = stop_stack(stack) + (stop_stack(kafka) if kafka is not None else [])
        for row in rows:  # e.g. PostgreSQL restarted by a crash but no longer managed
            row["failures"] += problems
            row["passed"] = row["passed"] and not problems
    return rows


def _print(row: dict[str, Any]) -> None:
    print(
        f"--- {row['scenario']}: {'PASS' if row['passed'] else 'FAIL'}"
        f" in {row.get('seconds', '?')} s: sent {row['sent']} (+{row['bad_sent']} bad), "
        f"registered once {row['registered_once']}, lost {row['lost']}, doubled "
        f"{row['doubled']}, duplicate announcements {row['duplicate_announcements']}, "
        f"quarantined {row['quarantined']}, recovered without a manual step: "
        f"{'yes' if row['recovered'] else 'NO'}, settled in {row['settle_seconds']} s",
        flush=True,
    )
    for failure in row["failures"]:
        print(f"    ! {failure}")
    if not row["passed"]:
        print("    timeline:\n      " + "\n      ".join(row.get("events", [])))
        print(f"    logs: {row.get('logs')}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
