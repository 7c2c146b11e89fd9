"""``obsingest stack``'s work: drive ``infra.local.stack`` and print what it did."""

from __future__ import annotations

import argparse
import sys
import time

from infra.local.stack import Stack


def _stack(args: argparse.Namespace) -> Stack:
    return Stack(only=list(args.services) or None)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def up(args: argparse.Namespace) -> int:
    from infra.local.stack import StackError

    t0 = time.monotonic()
    stack = _stack(args)
    try:
        result = stack.up(timeout=args.timeout)
    except StackError as exc:
        return _fail(exc)
    took = time.monotonic() - t0
    started = ", ".join(result.started) or "none"
    print(
        f"started: {started}; already running: {', '.join(result.already_running) or 'none'} ({took:.1f} s)"
    )
    return _table(stack)


def down(args: argparse.Namespace) -> int:
    stack = _stack(args)
    stopped = stack.down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    if stack.refused:
        print(
            f"left running: {', '.join(stack.refused)} (started by a running test session or "
            f"another owner; see {stack.settings.run_dir / 'stops.log'})"
        )
    return 0


def status(args: argparse.Namespace) -> int:
    return _table(_stack(args))


def _table(stack: Stack) -> int:
    """Print the health table; 1 if a service is unhealthy."""
    from infra.local.stack import render_status_table

    rows = stack.status()
    print(render_status_table(rows), end="")
    return 0 if all(r.healthy for r in rows) else 1


def env(args: argparse.Namespace) -> int:
    from infra.local.stack import render_exports

    print(render_exports(_stack(args).env()), end="")
    return 0


def fetch(args: argparse.Namespace) -> int:
    from infra.local.stack import StackError

    try:
        _stack(args).fetch()
    except StackError as exc:
        return _fail(exc)
    print("artefacts are in the cache")
    return 0
