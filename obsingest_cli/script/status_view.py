"""``obsingest status``: the live terminal view of the night, or one snapshot for scripts
(``status_snapshot``: what is shown). Drawn with rich: the newest exposures against the budget,
the verdict on the last one, the quarantine, and what each process's metrics say."""

from __future__ import annotations

import sys
import time
from contextlib import suppress
from datetime import timedelta
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from obsingest.registry.completeness import COMPLETE, INCOMPLETE
from obsingest.registry.presence import PresenceReader
from obsingest.settings import PipelineSettings, RegistrySettings
from obsingest_cli.script.status_snapshot import NOTHING_TO_JUDGE, Snapshot, as_json, take

_STYLE = {COMPLETE: "green", INCOMPLETE: "red"}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def exposures_table(snapshot: Snapshot) -> Table:
    table = Table(title="newest exposures", title_justify="left", expand=False)
    for name, justify in (
        ("exposure", "right"),
        ("instrument", "left"),
        ("filter", "left"),
        ("expected", "right"),
        ("registered", "right"),
        ("missing", "left"),
        ("p50 s", "right"),
        ("p95 s", "right"),
        ("max s", "right"),
        ("over budget", "right"),
        ("status", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for e in snapshot.exposures:
        missing = ",".join(str(d) for d in e.missing[:8]) + ("..." if len(e.missing) > 8 else "")
        expected = f"{e.expected}" + ("" if e.expected_source == "manifest" else " (instrument)")
        table.add_row(
            str(e.exposure),
            e.instrument,
            e.physical_filter or "-",
            expected,
            str(e.registered),
            missing or "-",
            _seconds(e.latency_p50),
            _seconds(e.latency_p95),
            _seconds(e.latency_max),
            str(len(e.over_budget)),
            Text(e.status.replace("_", " "), style=_STYLE.get(e.status, "yellow")),
        )
    return table


def verdict(snapshot: Snapshot) -> Text:
    last = snapshot.last
    if snapshot.error:
        return Text(f"registry not readable: {snapshot.error}", style="bold red")
    if last is None:
        return Text("no exposure in the registry yet", style="yellow")
    head = f"last exposure {last.instrument} {last.exposure}: "
    if last.made_budget:
        return Text(
            head + f"made the budget ({last.registered}/{last.expected} CCDs, max "
            f"{_seconds(last.latency_max)} s <= {snapshot.budget_seconds:g} s)",
            style="bold green",
        )
    why = []
    if last.missing:
        why.append(f"{len(last.missing)} of {last.expected} CCDs missing")
    if last.over_budget:
        why.append(
            f"{len(last.over_budget)} CCDs over {snapshot.budget_seconds:g} s "
            f"(max {_seconds(last.latency_max)} s)"
        )
    return Text(head + "MISSED the budget: " + "; ".join(why), style="bold red")


def quarantine_panel(snapshot: Snapshot) -> Panel:
    q = snapshot.quarantine or {}
    lines = [Text(f"{q.get('total', 0)} quarantined recently")]
    for reason, count in (q.get("by_reason") or {}).items():
        lines.append(Text(f"  {reason}: {count}"))
    for entry in q.get("recent") or []:
        lines.append(Text(f"  latest: {entry['reason']}  {entry['object_uri']}"[:160], style="dim"))
    style = "yellow" if q.get("total") else "green"
    return Panel(Group(*lines), title="quarantine (registry)", border_style=style)


def metrics_panel(snapshot: Snapshot) -> Panel:
    rows: list[Any] = []
    for source in snapshot.metrics:
        if not source.up:
            rows.append(Text(f"{source.url}: DOWN ({source.error})", style="bold red"))
            continue
        rows.append(Text(f"{source.url}: up", style="green"))
        for name, (total, parts) in source.values.items():
            detail = ", ".join(f"{k}={v:g}" for k, v in parts.items() if k and v)
            style = "yellow" if total and "lag" not in name else ""
            rows.append(Text(f"  {name}: {total:g}" + (f" ({detail})" if detail else ""), style))
        if not source.values:
            rows.append(Text("  (none of the pipeline's metrics)", style="dim"))
    return Panel(Group(*rows), title="processes (metrics)")


def render(snapshot: Snapshot) -> Group:
    header = Text(
        f"obsingest status  {snapshot.taken:%Y-%m-%d %H:%M:%S} UTC  registry "
        f"{snapshot.registry}  budget {snapshot.budget_seconds:g} s per CCD",
        style="bold",
    )
    parts: list[Any] = [header, exposures_table(snapshot), verdict(snapshot)]
    parts.append(quarantine_panel(snapshot))
    if snapshot.metrics:
        parts.append(metrics_panel(snapshot))
    return Group(*parts)


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
