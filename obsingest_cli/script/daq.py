"""``obsingest daq``'s work: the DAQ simulator (``producers.daq``) from the command line."""

from __future__ import annotations

import argparse
import sys


def night(args: argparse.Namespace) -> int:
    """Play a night into the hand-off directory at the summit's cadence."""
    from producers.daq.night import NightPlan, play_night

    plan = NightPlan(args.handoff, args.instrument, args.exposures, args.detectors,
                     args.interval, args.size, args.day_obs, args.first_seq, seed=args.seed)
    try:
        played = play_night(plan, lambda e: print(f"exposure {e.exposure}: {len(e.files)} CCDs"))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {sum(len(e.files) for e in played)} CCDs in {len(played)} exposures")
    return 0


def write_one(args: argparse.Namespace) -> int:
    """Write one simulated raw CCD."""
    from datetime import UTC, datetime

    from producers.daq.simulator import CcdSpec, write_raw_ccd

    try:
        start = datetime.fromisoformat(args.obs_start) if args.obs_start else datetime.now(UTC)
        spec = CcdSpec(
            instrument=args.instrument,
            exposure=args.exposure,
            detector=args.detector,
            day_obs=args.exposure // 100_000,
            obs_start=start,
            exposure_time=args.exptime,
            filter=args.filter,
            size=args.size,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = write_raw_ccd(spec, args.output)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0
