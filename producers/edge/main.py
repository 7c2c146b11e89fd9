"""The edge service's process entry point: ``python -m producers.edge`` / ``obsingest edge``; runs
until SIGTERM or SIGINT, then drains in-flight sends (exit codes: producers/edge/README.md).
Imports only the standard library at import time: ``obsingest --help`` builds its parser from
``add_arguments``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

DESCRIPTION = """\
The edge service: take the DAQ's raw CCD files from a hand-off directory (watched, plus a scan at
start-up), journal each one in the spool (SQLite WAL: seen -> compressed -> sent -> acked),
compress it (tiled Rice) and send it to the destination, newest exposure first. It resumes every
unacknowledged CCD after a crash, retries a destination outage for as long as it lasts, quarantines
bad files with their reason and refuses new work loudly while the spool is full. GET /health on
the health port gives ready/degraded and counts."""

EXIT_USAGE = 2
EXIT_SPOOL = 73

_SECONDS = {"type": float, "metavar": "S"}
_DIR = {"type": Path, "metavar": "DIR"}
#: the edge's options in --help order: flag -> (EdgeSettings field, help, add_argument keywords)
_OPTIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "--to": (
        "destination",
        "destination: gs://BUCKET, file://DIR or kafka://HOST:PORT/TOPIC",
        {"metavar": "URL"},
    ),
    "--spool": ("spool", "spool directory: journal + compressed CCDs waiting to be sent", _DIR),
    "--handoff": ("handoff", "the DAQ's hand-off directory to watch (see the README)", _DIR),
    "--workers": ("workers", "worker processes (default 2)", {"type": int}),
    "--threads": ("threads", "compression threads per worker (default 1)", {"type": int}),
    "--prefix": ("prefix", "object name prefix (default raw/)", {}),
    "--complete": (
        "complete",
        "completeness rule: final name after rename (default) or size-stable",
        {"choices": ("rename", "settle")},
    ),
    "--settle": ("settle_seconds", "seconds a file must stay unchanged in settle mode (default 2)", _SECONDS),
    "--incomplete-timeout": (
        "incomplete_timeout",
        "quarantine *.tmp/*.part files older than this (default 600)",
        _SECONDS,
    ),
    "--rescan-interval": (
        "rescan_interval",
        "full rescan of the hand-off directory every S seconds (default 30)",
        _SECONDS,
    ),
    "--on-ack": (
        "on_ack",
        "what to do with a raw file once acknowledged (default keep)",
        {"choices": ("keep", "delete", "move")},
    ),
    "--done-dir": ("done_dir", "target of --on-ack move (HANDOFF/done)", {"type": Path}),
    "--retry-max-delay": ("retry_max_delay", "cap of the destination backoff (default 10)", _SECONDS),
    "--min-free-mb": (
        "min_free_bytes",
        "refuse new work below this much free spool space (default 512)",
        {"type": float, "metavar": "MB"},
    ),
    "--max-refusing": (
        "max_refusing_seconds",
        "exit 75 after refusing new work this long (default: never)",
        _SECONDS,
    ),
    "--budget": ("budget_seconds", "readout -> acknowledged budget; later CCDs are reported (5)", _SECONDS),
    "--health-host": ("health_host", "health endpoint address (default 127.0.0.1)", {}),
    "--health-port": (
        "health_port",
        "health endpoint port (default 8089; 0: any free, -1: off)",
        {"type": int},
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The edge's options (every one also settable as OBSINGEST_EDGE_<FIELD>)."""
    for flag, (_field, help_text, kwargs) in _OPTIONS.items():
        parser.add_argument(flag, help=help_text, **kwargs)
    parser.add_argument("--log-level", default="INFO", help="log level (default INFO)")


def settings_from_args(args: argparse.Namespace) -> Any:
    """EdgeSettings from the environment, overridden by the flags given."""
    from producers.edge.settings import EdgeSettings

    overrides: dict[str, Any] = {}
    for flag, (name, _help, _kwargs) in _OPTIONS.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is None:
            continue
        if flag == "--min-free-mb":
            value = int(value * 1024 * 1024)
        overrides[name] = value
    return EdgeSettings(**overrides)


def run(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM/SIGINT; the exit code."""
    from pydantic import ValidationError

    from obsingest import logs
    from producers.edge.errors import SpoolFull, SpoolUnavailable

    logs.configure(level=args.log_level)
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from obsingest.metrics import get_metrics
    from obsingest.metrics_http import MetricsPortUnavailable, serve_metrics
    from producers.edge.service import EdgeService

    service = EdgeService(settings, log_level=args.log_level, metrics=get_metrics())
    try:
        metrics_server = serve_metrics()  # /metrics on OBSINGEST_METRICS_PORT (0: off)
    except MetricsPortUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        service.start()
    except (SpoolFull, SpoolUnavailable) as exc:
        print(f"error: cannot use the spool: {exc}", file=sys.stderr)
        service.stop(timeout=5)
        return EXIT_SPOOL
    except OSError as exc:  # e.g. the health port is taken
        print(f"error: cannot start: {exc}", file=sys.stderr)
        service.stop(timeout=5)
        return EXIT_USAGE
    while not stop.is_set() and not service.wait_stopped(0.2):
        pass
    service.stop()
    if metrics_server is not None:
        metrics_server.close()
    return service.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m producers.edge", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
