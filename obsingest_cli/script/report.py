"""``obsingest report``'s work: load summaries (and arrivals), print the table, write plots."""

from __future__ import annotations

from pathlib import Path


def run_report(summaries: list[str], arrivals: list[str], output_dir: Path, exposure: int | None) -> int:
    from beam_jobs.report import format_summary_table, load_arrivals, load_summaries, write_report

    loaded = load_summaries(summaries)
    print(format_summary_table(loaded))
    plots = write_report(loaded, load_arrivals(arrivals) if arrivals else [], output_dir, exposure)
    for name, path in plots.items():
        print(f"{name}: {path}")
    return 0
