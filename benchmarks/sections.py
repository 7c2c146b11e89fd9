"""The README section of each benchmark: its figures as a short table, the reference measured in
the same run, and the goal met or not. ``generic`` renders a benchmark without its own section."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from benchmarks.common import note

#: the transfer plot, written by run_all next to the results
PLOT = Path(__file__).resolve().parent / "results" / "transfer.png"


def _transfer(result: dict[str, Any]) -> str:
    from benchmarks.transfer import format_section

    return format_section(result, PLOT.name if PLOT.exists() else None)


def _beam(result: dict[str, Any]) -> str:
    ours, plain = result["summarize_events_per_s"], result["plain_gbk_events_per_s"]
    per_repeat = ", ".join(f"{r:.2f}x" for r in result["ratio_per_repeat"])
    lag = result["streaming_lag"]
    return "\n".join(
        [
            f"{result['events']:,} ArrivalEvents ({result['exposures']} exposures x "
            f"{result['detectors']} CCDs), {result['runner']}, median of {result['repeats']} "
            "alternated repeats; ratios are of medians from the same run.",
            "",
            "| pipeline | seconds | CPU seconds | events/s | vs plain GroupByKey |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| ours (summaries) | {result['summarize_s_median']} | "
            f"{result['summarize_cpu_s_median']} | {ours:,} | "
            f"{result['ratio_events_per_s']:.2f}x (CPU {result['ratio_cpu']:.2f}x) |",
            f"| plain GroupByKey + percentiles | {result['plain_gbk_s_median']} | "
            f"{result['plain_gbk_cpu_s_median']} | {plain:,} | 1.00x |",
            "",
            f"Ratio per repeat: {per_repeat}. Reference figure: "
            f"{result['reference_plain_gbk_events_per_s']:,} events/s. "
            f"Streaming lag, last arrival -> summary: p50 {lag['lag_ms_p50']} ms, max "
            f"{lag['lag_ms_max']} ms ({lag['method']}).",
        ]
    )


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _table(rows: list[tuple[str, dict[str, Any]]], first: str) -> list[str]:
    """Markdown table of (label, figures) rows; scalar columns only, at most 10."""
    keys: list[str] = []
    for _, figures in rows:
        keys += [k for k, v in figures.items() if _scalar(v) and k not in keys]
    keys = keys[:10]
    lines = [f"| {first} | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for label, figures in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(figures.get(k, "")) for k in keys) + " |")
    return lines


def generic(result: dict[str, Any]) -> str:
    """Benchmarks without a dedicated section: their scalars, then one table per list of
    records or mapping of records, then the goal."""
    scalars = {k: v for k, v in result.items() if _scalar(v) and k not in ("benchmark", "when", "host")}
    lines = [f"- {k}: {_cell(v)}" for k, v in scalars.items()]
    for key, value in result.items():
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            lines += ["", f"{key}:", "", *_table([(str(i + 1), r) for i, r in enumerate(value)], "#")]
        elif isinstance(value, dict) and value and all(isinstance(r, dict) for r in value.values()):
            lines += ["", f"{key}:", "", *_table(list(value.items()), key)]
    goal = result.get("goal")
    if isinstance(goal, dict) and "met" in goal:
        lines += ["", f"Goal: {'met' if goal['met'] else 'NOT met'}"]
    return "\n".join(lines) or "(no figures)"


def _butler(result: dict[str, Any]) -> str:
    med, rates = result["median_seconds"], result["rates_per_s"]
    goal = result["goal"]
    tx = result["obsingest_transactions_per_exposure"]
    return "\n".join(
        [
            f"{result['repository']}; run `LSSTCam/raw/all`; small LSSTCam CCDs; median of "
            f"{result['repeats']} runs on fresh exposures; load average at the start "
            f"{result['machine']['load_1min']}.",
            "",
            "| registration | seconds | files/s | vs Butler one file per call |",
            "| --- | ---: | ---: | ---: |",
            f"| obsingest, one event at a time (per CCD) | {med['obsingest_per_ccd_s']} | "
            f"{rates['obsingest_per_ccd_per_s']:,} | "
            f"{rates['obsingest_per_ccd_per_s'] / rates['butler_per_file_per_s']:.1f}x |",
            f"| obsingest, a {result['detectors']}-CCD exposure arriving at once (group commit) | "
            f"{med['obsingest_exposure_s']} | {rates['obsingest_exposure_per_s']:,} | "
            f"{result['factor_vs_butler_per_file']}x |",
            f"| Butler `ingest`, one file per call | {med['butler_per_file_s']} | "
            f"{rates['butler_per_file_per_s']:,} | 1.0x |",
            f"| Butler `ingest`, one call per exposure | {med['butler_per_exposure_s']} | "
            f"{rates['butler_per_exposure_per_s']:,} | "
            f"{rates['butler_per_exposure_per_s'] / rates['butler_per_file_per_s']:.1f}x |",
            "",
            *(
                [
                    f"CPU seconds (this process, every thread): obsingest's exposure "
                    f"{med['obsingest_exposure_cpu_s']}, Butler one file per call "
                    f"{med['butler_per_file_cpu_s']} per file: "
                    f"{result['cpu_factor_vs_butler_per_file']}x in CPU.",
                    "",
                ]
                if "obsingest_exposure_cpu_s" in med
                else []
            ),
            "Butler transactions per obsingest exposure: "
            + "; ".join(f"{t['transactions']} (largest {t['largest']})" for t in tx),
            "",
            f"Goal (exposure registered within {goal['exposure_within_s']} s of its last CCD, "
            f">= {goal['factor']:g}x Butler's one-file-per-call rate): "
            f"{'met' if goal['met'] else 'NOT met'}",
            "",
            note("butler").rstrip(),
        ]
    )


def _butler_facility(result: dict[str, Any]) -> str:
    ours, ref = result["obsingest"], result["butler_ingest_files"]
    load = result["machine"]["load_1min"]
    stages, cpu = ours["stages"], ours["cpu_seconds"]
    lines = [
        f"A whole LSSTCam exposure ({result['ccds']} CCDs) delivered at once to "
        f"{result['instances']} warm register-function processes ({ours['handlers']} "
        "handlers each) on one PostgreSQL Butler from `butler create` (load average at the "
        f"start {load} on {result['machine']['cpus']} cores).",
        "",
        "| path | seconds | in the Butler | registered | announced | batches (largest) |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        f"| obsingest, delivery -> last CCD announced | {ours['seconds']} | "
        f"{ours['in_butler']} | {ours['registered']} | {ours['announced']} | "
        f"{ours['batches']} ({ours['largest_batch']}) |",
        f"| `butler ingest-files` (whole command) | {ref['seconds']} | {ref['in_butler']} | - | - | - |",
        "",
    ]
    lines += [
        "Seconds after the delivery when the last CCD was read and checked "
        f"{stages['last_checked']}, committed (Butler + companion) "
        f"{stages['last_committed']}, announced {stages['last_announced']}, its handler "
        f"back {stages['last_returned']}; batches took {stages['batch_seconds_sum']} s in "
        f"all. CPU seconds per instance: start-up {cpu['warm_up']} (imports, the "
        f"Butler and the companion opened; {ours['warm_up_seconds']} s wall for both), "
        f"handling {cpu['handling']}.",
        "",
        note("butler_facility").rstrip().format(warm_up=ours["warm_up_seconds"], load=load),
        "",
    ]
    lines.append(
        f"Ratio (butler ingest-files / obsingest): {result['ratio']} warm, "
        f"{result['ratio_cold']} counting the instances' start-up. Goal (last CCD within "
        f"{result['goal']['last_ccd_within_seconds']} s, 205 in the "
        f"Butler, each announced): {'met' if result['goal']['met'] else 'NOT met'}."
    )
    return "\n".join(lines)


def _own(name: str) -> Callable[[dict[str, Any]], str]:
    """The section a benchmark module writes itself (its ``format_section``)."""
    return lambda result: import_module(f"benchmarks.{name}").format_section(result)


SECTIONS = {
    "butler_facility": _butler_facility,
    "transfer": _transfer,
    "beam_batch": _beam,
    "butler": _butler,
    **{
        name: _own(name)
        for name in ("capacity", "facility", "edge_restart", "compression", "edge", "backfill", "presence")
    },
}
