"""``obsingest report``'s work: load summaries (and arrivals), print the table, write plots."""

from __future__ import annotations

from pathlib import Path


def run_report(
    summaries_files: list[str], arrivals_files: list[str], output_dir: Path, exposure: int | None
) -> int:
    from beam_jobs.report import format_summary_table, load_arrivals, load_summaries, write_report

    summaries = load_summaries(summaries_files)
    arrivals = load_arrivals(arrivals_files) if arrivals_files else []
    print(format_summary_table(summaries))
    for name, path in write_report(summaries, arrivals, output_dir, exposure).items():
        print(f"{name}: {path}")
    return 0
