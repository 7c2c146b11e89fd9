"""``obsingest status``: the live terminal view of the night, or one snapshot for scripts
(``status_snapshot``: what is shown; ``status_view``: how)."""

from __future__ import annotations

import sys
import time
from contextlib import suppress
from datetime import timedelta

from obsingest.registry.presence import PresenceReader
from obsingest.settings import PipelineSettings, RegistrySettings
from obsingest_cli.script.status_snapshot import NOTHING_TO_JUDGE, as_json, take
from obsingest_cli.script.status_view import render


def run_status(
    registry: str | None,
    metrics: list[str],
    *,
    once: bool,
    as_json_output: bool,
    interval: float,
    exposures: int,
    since_hours: float,
    budget: float | None,
) -> int:
    """The live view until Ctrl-C, or one snapshot printed (``once``) with its exit code."""
    from rich.console import Console

    settings = RegistrySettings(url=registry) if registry else RegistrySettings()
    budget_seconds = budget if budget is not None else PipelineSettings().budget_seconds
    console = Console()
    if not console.is_terminal:  # a script's pipe or file: room for every column
        console = Console(width=150)
    try:
        reader = PresenceReader.open(settings, budget_seconds)
    except Exception as exc:
        print(f"obsingest status: cannot read the registry: {exc}", file=sys.stderr)
        return NOTHING_TO_JUDGE
    since = timedelta(hours=since_hours)
    try:
        if once:
            snapshot = take(reader, metrics, exposures, since)
            if as_json_output:
                print(as_json(snapshot))
            else:
                console.print(render(snapshot))
            if snapshot.error:
                print(f"obsingest status: {snapshot.error}", file=sys.stderr)
                return NOTHING_TO_JUDGE
            return snapshot.exit_code
        from rich.live import Live

        snapshot = take(reader, metrics, exposures, since)
        with suppress(KeyboardInterrupt), Live(render(snapshot), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(render(take(reader, metrics, exposures, since)), refresh=True)
        return 0
    finally:
        reader.close()
