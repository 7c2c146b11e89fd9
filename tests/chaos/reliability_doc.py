"""The results table of ``make chaos`` in docs/reliability.md (between two markers; the prose
around it is written by hand), and its raw form in docs/reliability.json."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
RAW = ROOT / "docs" / "reliability.json"
BEGIN = "<!-- chaos:begin (written by `make chaos`; edit the prose around it, not this) -->"
END = "<!-- chaos:end -->"


def _quarantined(row: dict[str, Any]) -> str:
    found = row["quarantined"]
    total = sum(found.values())
    parts = ", ".join(f"{reason} {n}" for reason, n in found.items())
    return f"{total}/{row['bad_sent']}" + (f" ({parts})" if parts else "")


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| scenario | faults (s after the night began) | sent | registered once | lost | "
        "doubled | dup. announcements | bad input quarantined with reason | recovered "
        "without a manual step | settled in | result |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |\n"
    )
    lines = []
    for r in rows:
        settle = f"{r['settle_seconds']:.0f} s" if r["settle_seconds"] is not None else "—"
        lines.append(
            f"| `{r['scenario']}` | {'; '.join(r['faults']) or '—'} | {r['sent']} | "
            f"{r['registered_once']} | {r['lost']} | {r['doubled']} | "
            f"{r['duplicate_announcements']} | {_quarantined(r)} | "
            f"{'yes' if r['recovered'] else 'NO'} | {settle} | "
            f"{'pass' if r['passed'] else 'FAIL'} |"
        )
    return head + "\n".join(lines) + "\n"


def section(rows: list[dict[str, Any]], seed: int, started: datetime, seconds: float) -> str:
    sent = sum(r["sent"] for r in rows)
    bad = sum(r["bad_sent"] for r in rows)
    failed = [r["scenario"] for r in rows if not r["passed"]]
    verdict = "every scenario passed" if not failed else f"FAILED: {', '.join(failed)}"
    return (
        f"{BEGIN}\n\n"
        f"Run {started:%Y-%m-%d %H:%M} UTC, seed **{seed}** (replay: `python -m tests.chaos "
        f"--seed {seed}`), {len(rows)} scenarios, {sent} CCDs handed off and {bad} bad inputs "
        f"in {seconds / 60:.0f} min on {platform.machine()} with "
        f"{_cores()} cores: {verdict}.\n\n"
        f"{table(rows)}\n{END}"
    )


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def write(
    rows: list[dict[str, Any]], seed: int, started: datetime, seconds: float, doc: Path = DOC, raw: Path = RAW
) -> None:
    """Replace the generated section of ``doc`` (appended if the markers are missing)."""
    text = doc.read_text() if doc.exists() else "# Reliability\n"
    new = section(rows, seed, started, seconds)
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        text = before + new + after
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    doc.write_text(text)
    raw.write_text(
        json.dumps(
            {
                "seed": seed,
                "started": started.astimezone(UTC).isoformat(),
                "seconds": round(seconds),
                "scenarios": rows,
            },
            indent=1,
        )
        + "\n"
    )
