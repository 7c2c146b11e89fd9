"""``obsingest backfill`` / ``python -m producers.backfill``: options and the run.

Exit codes: 0 every file verified in the store; 1 some files failed (listed with reasons); 2 bad
command line, or a source that cannot be listed; 73 the spool (journal) cannot be used; 75 every
failure was a resource run out (destination full, rate-limited, ...: one line names it).
Rerunning the same command resumes.
Imports only the standard library at import time (``obsingest --help`` uses ``add_arguments``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DESCRIPTION = """\
Bulk transfer of an archive to the object store: SRC is a directory tree, a glob (quote it;
** recurses) or @LIST (a file of paths). Every file is journalled in --spool first (an
interrupted backfill rerun resumes where it stopped), uploaded create-once by --parallel
processes and verified by CRC32C and size against what the store holds. Files may have any
name: each is stored under the name its FITS header gives, the camera's file name in Rubin's
layout below the prefix (PREFIX/{instrument}/{day_obs}/{obs_id}/{obs_id}_{raft}_{sensor}.fits);
a file that is not FITS or whose header says no CCD fails with its reason. Shows a progress bar
with rate and ETA, and a final table of files, bytes, Gbit/s and failures with their reasons.
Then `obsingest reconcile` registers what no notification announced."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", nargs="+", metavar="SRC", help="directory, glob or @LIST")
    parser.add_argument(
        "--to", required=True, metavar="URL", help="destination: gs://BUCKET[/PREFIX] or file://DIR"
    )
    parser.add_argument(
        "--spool",
        type=Path,
        default=Path("backfill-spool"),
        help="journal directory (default ./backfill-spool)",
    )
    parser.add_argument(
        "--prefix", help="object name prefix (default: the destination's; file://DIR has none)"
    )
    parser.add_argument("--parallel", type=int, default=4, help="upload processes (default 4)")
    parser.add_argument("--batch", type=int, default=8, help="files per hand-out (default 8)")
    parser.add_argument(
        "--retries", type=int, default=3, help="rounds of retries for transient failures (default 3)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument("--log-level", default="WARNING", help="log level (default WARNING)")


def run(args: argparse.Namespace) -> int:
    from obsingest import logs
    from producers.backfill.run import BackfillConfig, run_backfill
    from producers.edge.errors import SpoolFull, SpoolUnavailable

    logs.configure(level=args.log_level)
    if args.parallel < 1 or args.batch < 1:
        print("error: --parallel and --batch must be >= 1", file=sys.stderr)
        return 2
    config = BackfillConfig(
        args.sources,
        args.to,
        args.spool,
        args.parallel,
        args.batch,
        args.retries,
        progress=not args.no_progress,
        prefix=args.prefix,
    )
    try:
        report = run_backfill(config)
    except (ValueError, OSError) as exc:  # a source missing or that cannot be listed
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (SpoolFull, SpoolUnavailable) as exc:
        print(f"error: cannot use the spool: {exc}", file=sys.stderr)
        return 73
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return _exit_code(report.failed)


#: every file that failed failed because a resource ran out: rerun later (sysexits.h)
EXIT_EXHAUSTED = 75


def _exit_code(failed: dict[str, str]) -> int:
    """0 nothing failed; 75 (one line naming what ran out) when every failure is an exhausted
    resource (destination full, rate-limited, ...): the same rerun will resume; else 1."""
    from obsingest.exhaustion import EXHAUSTION_REASONS

    if not failed:
        return 0
    if all(why.split(":", 1)[0] in EXHAUSTION_REASONS for why in failed.values()):
        first = next(iter(failed.values()))
        print(
            f"obsingest backfill: resource exhausted, {len(failed):,} file(s) not sent "
            f"(rerun to resume): {first}",
            file=sys.stderr,
        )
        return EXIT_EXHAUSTED
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m producers.backfill", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
