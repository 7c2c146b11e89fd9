"""What every benchmark result records about the run (when, how busy the machine was) and the
notes on what moved its figures (``benchmarks/notes/<name>.md``, prose kept out of the code)."""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def run_header(name: str) -> dict[str, Any]:
    """``benchmark``, ``when`` and ``machine`` fields of a result (load matters on 2 cores)."""
    return {
        "benchmark": name,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
    }


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
NOTES = ROOT / "benchmarks" / "notes"


def note(name: str) -> str:
    """``notes/<name>.md`` without its leading ``<!-- ... -->`` comment (what the note is)."""
    return re.sub(r"\A<!--.*?-->\n", "", (NOTES / f"{name}.md").read_text(), flags=re.S)


def save_result(name: str, result: dict[str, Any]) -> None:
    """Write a benchmark's result JSON, ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")


def tool_version(*argv: str) -> str:
    """What ``argv`` (a tool's version option) prints."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).strip() or "not found"


def stack_env(*only: str) -> dict[str, str]:
    """The local stack's ``only`` services, started if need be (running ones are reused): the
    environment clients need."""
    from infra.local.stack import Stack

    stack = Stack(only=list(only))
    if not all(service.healthy() for service in stack.services):
        stack.up()
    return stack.env()


def gcs_client() -> Any:
    """A storage client on the configured GCS (the local stack's emulator)."""
    from obsingest.store.gcs import GcsSettings, make_client

    return make_client(GcsSettings())


def fresh_bucket(client: Any, prefix: str) -> str:
    """A new, empty bucket ``<prefix>-<clock>`` for one run (``drop_bucket`` removes it)."""
    name = f"{prefix}-{int(time.time() * 1000) % 10**9}"
    client.create_bucket(name)
    return name


def drop_bucket(client: Any, bucket: str) -> int:
    """Delete ``bucket`` and every object in it; how many objects there were."""
    count = 0
    for blob in client.list_blobs(bucket):
        blob.delete()
        count += 1
    client.bucket(bucket).delete()
    return count


def _items(each: type, text: str) -> tuple[Any, ...]:
    return tuple(each(x) for x in text.split(","))


def cli(
    run: Callable[..., dict[str, Any]],
    show: Callable[[dict[str, Any]], str] | None = None,
    ok: Callable[[dict[str, Any]], bool] | None = None,
    argv: list[str] | None = None,
    **defaults: Any,
) -> int:
    """``python -m benchmarks.<name>``: ``run``'s parameters as options (``defaults`` override its
    own), the result printed by ``show`` (else as JSON); exit 1 when ``ok`` says a goal was missed."""
    parser = argparse.ArgumentParser(description=(sys.modules[run.__module__].__doc__ or "").splitlines()[0])
    for name, param in inspect.signature(run).parameters.items():
        default = defaults.get(name, param.default)
        flag = f"--{name.replace('_', '-')}"
        if default is None:  # a caller's parameter (a table, a hook), not a command-line option
            continue
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif isinstance(default, tuple) and default:
            parser.add_argument(
                flag, type=functools.partial(_items, type(default[0])), nargs="+", default=default
            )
        elif isinstance(default, (int, float, str)):
            parser.add_argument(flag, type=type(default), default=default)
        else:
            raise TypeError(f"{run.__module__}.{run.__name__}: no option for {name}={default!r}")
    args = {k: sum(v, ()) if isinstance(v, list) else v for k, v in vars(parser.parse_args(argv)).items()}
    result = run(**args)
    print(show(result) if show else json.dumps(result, indent=2, default=str))
    return 0 if ok is None or ok(result) else 1
