"""``make soak`` (``python -m tests.soak``): play the soak (``tests.soak.harness``), print the seed
first and the figures last, write benchmarks/results/soak.json and the README's ``## soak``.

Default: Rubin's cadence, 5 exposures x 205 CCDs, a register-function SIGKILL inside each of the
5 bursts (the issue's Done line). ``--ci``: 3 exposures every 6 s, 1 SIGKILL. Replay a run with
``--seed``. Exit 0 when nothing was lost or doubled and the pipeline settled by itself, and (not
with ``--ci``) every CCD within 5 s and every exposure's last CCD within 7 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--exposures", type=int, default=5)
    parser.add_argument("--interval", type=float, default=17.0, help="seconds between exposures")
    parser.add_argument("--kills", type=int, default=5, help="bursts with a function SIGKILL")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--instances",
        type=int,
        default=None,
        help="register-function instances the relay spreads over (default 2)",
    )
    parser.add_argument("--ci", action="store_true", help="3 exposures every 6 s, 1 SIGKILL")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--cold", action="store_true", help="an instance is ready once it listens, not once warm (for an A/B)"
    )
    parser.add_argument(
        "--restart-nice",
        type=int,
        default=None,
        help="autogroup niceness of a restarted instance until ready (default 10; 0: none)",
    )
    parser.add_argument(
        "--restart-after",
        type=float,
        default=None,
        help="seconds from a kill to its instance's restart (default 0.5; e.g. 5: after the burst)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="play in this directory and keep its logs")
    args = parser.parse_args(argv)
    if args.ci:
        args.exposures, args.interval, args.kills = 3, 6.0, 1
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(
        f"soak seed: {seed} (replay: python -m tests.soak --seed {seed}{' --ci' if args.ci else ''})",
        flush=True,
    )
    from tests.sigterm import interrupt_on_sigterm
    from tests.soak.harness import Soak, format_section, play, write

    interrupt_on_sigterm()

    soak = Soak(args.exposures, args.interval, args.kills, seed, warm=not args.cold)
    if args.instances is not None:
        soak.instances = args.instances
    if args.restart_nice is not None:
        soak.restart_nice = args.restart_nice
    if args.restart_after is not None:
        soak.restart_after = args.restart_after
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = play(soak, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            result = play(soak, Path(tmp))
    load = [round(x, 2) for x in os.getloadavg()]
    if args.keep is not None:
        (args.keep / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    result.pop("announced", None)
    print(json.dumps({k: v for k, v in result.items() if k != "events"}, indent=1, default=str))
    print("\n".join(result["events"]))
    print(format_section(result, load))
    if not args.no_write:
        write([result], load)
    ok = result["passed"] and result["lost"] == 0 and result["doubled"] == 0
    if not args.ci:
        ok = ok and result["budget_met"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
