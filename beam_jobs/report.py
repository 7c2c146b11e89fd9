"""Human-facing views of the summaries for ``obsingest demo`` and ``obsingest report``: a
per-exposure table and PNG plots (matplotlib, Agg).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from glob import glob
from itertools import groupby
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from beam_jobs.core import LATENCY_SCALE, Arrival, as_arrival, dedupe
from beam_jobs.sinks import read_summaries
from obsingest import avro, camera, defaults
from obsingest.messages import ArrivalEvent, ExposureSummary

_COLUMNS = (
    "exposure",
    "expected",
    "arrived",
    "complete",
    "p50 s",
    "p95 s",
    "max s",
    "over budget",
    "missing",
    "status",
)


LATENCY_LABEL = f"latency, readout -> published [s, {LATENCY_SCALE}]"


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def compact_ranges(values: Sequence[int], limit: int = 40) -> str:
    """[1,2,3,7] -> '1-3,7' (truncated with '...' past ``limit`` characters)."""
    if not values:
        return "-"
    # consecutive values share their value minus their index
    runs = [[v for _, v in run] for _, run in groupby(enumerate(sorted(values)), lambda iv: iv[1] - iv[0])]
    text = ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_summary_table(summaries: Iterable[ExposureSummary]) -> str:
    """Fixed-width table, one row per summary (sorted by instrument, exposure, revision)."""
    rows = [
        (
            str(s.exposure),
            "?" if s.expected is None else str(s.expected),
            str(s.arrived),
            "-" if s.completeness is None else f"{s.completeness:.0%}",
            _fmt(s.latency_p50),
            _fmt(s.latency_p95),
            _fmt(s.latency_max),
            str(len(s.over_budget)),
            compact_ranges(s.missing_detectors),
            s.status if s.revision == 0 else f"{s.status} (rev {s.revision})",
        )
        for s in sorted(summaries, key=lambda s: (s.instrument, s.exposure, s.revision))
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(_COLUMNS)]
    lines = [_row(_COLUMNS, widths), _row(["-" * w for w in widths], widths)]
    lines += [_row(r, widths) for r in rows]
    return "\n".join(lines)


def _row(values: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()


def _per_ccd(arrivals: Iterable[ArrivalEvent | Arrival]) -> list[Arrival]:
    """Deduplicated arrivals (one per detector and exposure), sorted by exposure, detector."""
    ordered = sorted(map(as_arrival, arrivals), key=lambda a: a.key)
    exposures = (dedupe(group, None).values() for _, group in groupby(ordered, lambda a: a.key))
    return [a for counted in exposures for a in sorted(counted, key=lambda a: a.detector)]


def _budget_line(ax: plt.Axes, budget: float, horizontal: bool = True) -> None:
    line = ax.axhline if horizontal else ax.axvline
    line(budget, color="tab:red", linestyle="--", linewidth=1.2, label=f"budget {budget:g} s")


def plot_latency(arrivals: list[ArrivalEvent], budget: float, path: Path) -> Path:
    """Per-CCD latency (readout -> published) against the budget line, one colour per exposure."""
    ccds = _per_ccd(arrivals)
    fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    exposures = sorted({a.exposure for a in ccds})
    cmap = plt.get_cmap("tab10")
    for i, exposure in enumerate(exposures):
        idx = [n for n, a in enumerate(ccds) if a.exposure == exposure]
        lat = [ccds[n].latency for n in idx]
        ax.scatter(idx, lat, s=14, color=cmap(i % 10), label=str(exposure) if i < 10 else None)
    over = [(n, a.latency) for n, a in enumerate(ccds) if a.latency > budget]
    if over:
        xs, ys = zip(*over, strict=True)
        ax.scatter(xs, ys, marker="x", s=40, color="tab:red", label="over budget")
    _budget_line(ax, budget)
    ax.set(xlabel="CCD (ordered by exposure, detector)", ylabel=LATENCY_LABEL)
    ax.set_title(f"Per-CCD latency: {len(ccds)} CCDs, {len(over)} over the {budget:g} s budget")
    ax.set_ylim(bottom=0, top=max([budget * 1.2, *(a.latency * 1.05 for a in ccds)]))
    ax.legend(fontsize="small", loc="upper left", ncols=2)
    return _save(fig, path)


def plot_latency_histogram(arrivals: list[ArrivalEvent] | list[Arrival], budget: float, path: Path) -> Path:
    latencies = np.array([a.latency for a in _per_ccd(arrivals)])
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    top = max(budget * 1.3, float(latencies.max()) if latencies.size else 0.0)
    ax.hist(latencies, bins=np.linspace(0, top, 60), color="tab:blue")  # type: ignore[arg-type]  # stubs: no ndarray
    _budget_line(ax, budget, horizontal=False)
    over = int((latencies > budget).sum())
    ax.set(xlabel=LATENCY_LABEL, ylabel="CCDs")
    ax.set_title(f"Latency of {latencies.size} CCDs ({over} over budget)")
    ax.legend()
    return _save(fig, path)


def plot_night(summaries: list[ExposureSummary], path: Path) -> Path:
    """p95 and max latency per exposure over the night, with the budget line."""
    rows = sorted(_final(summaries), key=lambda s: s.exposure)
    fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    x = np.arange(len(rows))
    p95 = np.array([s.latency_p95 for s in rows], dtype=float)  # None: NaN, not drawn
    mx = np.array([s.latency_max for s in rows], dtype=float)
    ax.plot(x, p95, marker=".", linewidth=1, label="p95")
    ax.plot(x, mx, marker=".", linewidth=1, alpha=0.7, label="max")
    bad = [i for i, s in enumerate(rows) if s.status != "OK"]
    if bad:
        ring: dict[str, Any] = {"marker": "o", "facecolors": "none", "edgecolors": "tab:red", "s": 60}
        ax.scatter(bad, np.nan_to_num(mx[bad]), label="not OK", **ring)
    if rows:
        _budget_line(ax, rows[0].budget_seconds)
    ax.set(xlabel="exposure (in order of exposure id)", ylabel=LATENCY_LABEL)
    ax.set_title(f"Per-exposure p95/max latency, {len(rows)} exposures")
    ax.legend(fontsize="small")
    return _save(fig, path)


def focal_plane_positions(
    instrument: str, detectors: Iterable[int]
) -> dict[int, tuple[float, float, float, float]]:
    """(x, y, width, height) in mm of each detector the camera knows, as obs_lsst places it (the
    footprint turned by the sensor's yaw, ``obsingest.camera``)."""
    out = {}
    for d in sorted(detectors):
        try:
            det = camera.detector(instrument, d)
        except KeyError:
            continue
        out[d] = (det.x_mm, det.y_mm, *det.footprint_mm)
    return out


def plot_focal_plane(
    summary: ExposureSummary, arrivals: list[ArrivalEvent] | list[Arrival], path: Path
) -> Path:
    """Per-detector latency of one exposure on the focal plane, every detector in its place with
    its true size (science, wavefront, guider), raft boundaries and names; missing detectors
    hatched grey, detectors over budget framed red."""
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import Normalize

    ccds = {
        a.detector: a.latency for a in _per_ccd(arrivals) if a.key == (summary.instrument, summary.exposure)
    }
    missing = set(summary.missing_detectors)
    try:
        every = set(camera.instrument(summary.instrument).detector_ids)
    except KeyError:
        every = set()
    pos = focal_plane_positions(summary.instrument, every | set(ccds) | missing)
    budget = summary.budget_seconds
    vmax = max(budget * 1.5, max(ccds.values(), default=budget))
    norm = Normalize(vmin=0, vmax=vmax)
    cmap = plt.get_cmap("magma_r")
    big = len(pos) > 20
    fig, ax = plt.subplots(figsize=(9, 8.2) if big else (7, 6), layout="constrained")
    for d, box in pos.items():
        if d not in ccds:  # missing hatched, not expected plain
            grey = {"facecolor": "lightgrey", "hatch": "xx"} if d in missing else {"facecolor": "whitesmoke"}
            ax.add_patch(_rect(box, edgecolor="grey", linewidth=0.4, **grey))
    arrived = [d for d in pos if d in ccds]
    collection = PatchCollection(
        [_rect(pos[d]) for d in arrived], cmap=cmap, norm=norm, edgecolor="white", linewidth=0.3
    )
    collection.set_array(np.array([ccds[d] for d in arrived]))
    ax.add_collection(collection)
    for d, lat in ccds.items():
        if lat > budget and d in pos:
            ax.add_patch(_rect(pos[d], fill=False, edgecolor="tab:red", linewidth=1.2))
    _raft_outlines(ax, summary.instrument, pos)
    for d, (x, y, _w, _h) in pos.items():
        det = camera.detector(summary.instrument, d)
        if big:
            ax.text(x, y, det.name_in_raft, ha="center", va="center", fontsize=3.6, color="dimgrey")
        else:
            state = f"{ccds[d]:.2f} s" if d in ccds else "missing"
            bbox: dict[str, Any] = {"facecolor": "white", "alpha": 0.7, "edgecolor": "none"}
            ax.text(x, y, f"{det.full_name}\n{d}: {state}", ha="center", va="center", fontsize=8, bbox=bbox)
    if pos:
        x0, x1, y0, y1 = _extent(pos.values(), pad=8.0)
        ax.set(xlim=(x0, x1), ylim=(y0, y1))
    ax.set_aspect("equal")
    label = f"{LATENCY_LABEL} (red frame: over budget; grey: missing)"
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=label, shrink=0.8)
    ax.set(xlabel="focal plane x [mm]", ylabel="focal plane y [mm]")
    purposes = Counter(camera.detector(summary.instrument, d).purpose for d in ccds if d in pos)
    counts = ", ".join(f"{n} {p.lower()}" for p, n in sorted(purposes.items()))
    title = f"{summary.instrument} exposure {summary.exposure}: {summary.status}"
    ax.set_title(f"{title}, {len(ccds)}/{len(pos)} detectors\n{counts}", fontsize=10)
    return _save(fig, path)


def _raft_outlines(ax: plt.Axes, instrument: str, pos: dict[int, tuple[float, float, float, float]]) -> None:
    """A frame around each raft's detectors and the raft's name above it."""
    rafts: dict[str, list[tuple[float, float, float, float]]] = {}
    for d, box in pos.items():
        rafts.setdefault(camera.detector(instrument, d).raft, []).append(box)
    for raft, boxes in rafts.items():
        x0, x1, y0, y1 = _extent(boxes, pad=1.5)
        ax.add_patch(
            plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor="steelblue", linewidth=0.9)
        )
        ax.text((x0 + x1) / 2, y1 + 0.8, raft, ha="center", va="bottom", fontsize=6, color="steelblue")


def _rect(box: tuple[float, float, float, float], **style: Any) -> Any:
    """The rectangle of a detector's (centre x, centre y, width, height)."""
    x, y, w, h = box
    return plt.Rectangle((x - w / 2, y - h / 2), w, h, **style)


def _extent(
    boxes: Iterable[tuple[float, float, float, float]], pad: float
) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1) around every box, ``pad`` mm wider on each side."""
    x, y, w, h = np.array(list(boxes)).T
    return (x - w / 2).min() - pad, (x + w / 2).max() + pad, (y - h / 2).min() - pad, (y + h / 2).max() + pad


def _final(summaries: Iterable[ExposureSummary]) -> list[ExposureSummary]:
    """The newest revision per exposure."""
    best: dict[tuple[str, int], ExposureSummary] = {}
    for s in summaries:
        if (key := (s.instrument, s.exposure)) not in best or s.revision > best[key].revision:
            best[key] = s
    return list(best.values())


def _save(fig: plt.Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def expand(patterns: Sequence[str]) -> list[str]:
    """Shell-style globs -> file names (a pattern that matches nothing is kept, to fail loudly)."""
    return [name for pattern in patterns for name in sorted(glob(pattern)) or [pattern]]


def load_arrivals(paths: Sequence[str]) -> list[ArrivalEvent]:
    return [
        ArrivalEvent.from_record(r)
        for path in expand(paths)
        for r in avro.read_container(Path(path), ArrivalEvent.SCHEMA)
    ]


def load_summaries(paths: Sequence[str]) -> list[ExposureSummary]:
    return [s for path in expand(paths) for s in read_summaries(path)]


def write_report(
    summaries: list[ExposureSummary],
    arrivals: list[ArrivalEvent],
    output_dir: Path,
    exposure: int | None = None,
) -> dict[str, Path]:
    """Write the report plots; returns {name: path}. Plots that need arrivals are skipped without
    them. The focal-plane map shows ``exposure`` or else the exposure with the worst max latency."""
    output_dir = Path(output_dir)
    written = {"night": plot_night(summaries, output_dir / "night_p95_max.png")}
    final = _final(summaries)
    if arrivals:
        budget = final[0].budget_seconds if final else defaults.BUDGET_SECONDS
        written["histogram"] = plot_latency_histogram(arrivals, budget, output_dir / "latency_histogram.png")
    if final:
        worst = max(final, key=lambda s: (s.latency_max or -1.0, s.exposure))
        chosen = next((s for s in final if exposure and s.exposure == exposure), worst)
        written["focal_plane"] = plot_focal_plane(
            chosen, arrivals, output_dir / f"focal_plane_{chosen.exposure}.png"
        )
    return written
