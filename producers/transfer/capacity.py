"""A capacity model of the pipeline (pure; benchmarks/README.md, "capacity"): from per-CCD CPU
and bytes measured here (``calibrate``), how long the last CCD of an exposure takes and what a
camera needs. The last of N CCDs read out together is announced at ``T(N) = L1 + max_r max(0,
N * D_r / c_r - D_r)`` (``L1``: readout -> announced of a CCD alone; ``D_r``: CPU seconds per CCD
at resource r, less its idle rate; ``c_r``: CCDs it serves at once): N jobs of ``D_r`` on ``c_r``
servers end no sooner than ``N * D_r / c_r`` (work conserved), and one CCD alone spent ``D_r`` of
``L1`` there (operational laws of a closed batch, not M/M/c). Limits: CPU seconds
are this machine's (``cpu_scale`` converts); memory, disk and lock contention count only as far
as they show in CPU seconds and ``L1``; ``L1`` from loopback is a floor (``extra_latency``).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

#: process role (``bench transfer``'s CPU-by-role report) -> pipeline stage
STAGE_OF_ROLE: dict[str, str] = {
    "edge_service": "send",
    "gcs": "store",
    "assembler": "store",
    "kafka": "store",
    "pubsub": "notify",
    "facility_process": "register+publish",
    "postgres": "register+publish",
}
STAGES = ("compress", "send", "store", "notify", "register+publish")
#: roles that are one Python process each (one interpreter lock: at most one core of CPU)
SINGLE_CORE_ROLES = {
    "facility_process": "register function process (one interpreter lock)",
    "assembler": "Kafka assembler process (one interpreter lock)",
}
#: cameras by name: detectors per exposure (DESIGN.md)
CAMERAS = {"LSSTCam": 205, "LSSTComCam": 9, "LATISS": 1}
NOT_OURS = ("others", "machine")


@dataclass(frozen=True)
class Calibration:
    """Per-CCD demands of one path, measured on this machine."""

    path: str
    cores: int
    ccds: int
    #: edge worker CPU seconds per CCD: read + compress, and send (incl. the edge service)
    compress_cpu: float
    send_cpu: float
    #: busy CPU seconds per CCD of every other role (see ``STAGE_OF_ROLE``)
    roles: dict[str, float]
    #: CPU seconds per second of each role while nothing is in flight (polling, timers)
    idle_rates: dict[str, float]
    #: cores other users took during the calibration's busy windows
    background: float
    #: readout -> announced of one CCD alone (the largest over the 1-CCD run's later
    #: exposures: the model predicts maxima)
    latency_one: float
    raw_bytes: int
    compressed_bytes: int
    edge_workers: int = 0

    @property
    def edge_cpu(self) -> float:
        return self.compress_cpu + self.send_cpu

    @property
    def total_cpu(self) -> float:
        return self.edge_cpu + sum(self.roles.values())

    def stages(self) -> dict[str, float]:
        """CPU seconds per CCD by stage."""
        out = dict.fromkeys(STAGES, 0.0) | {"compress": self.compress_cpu, "send": self.send_cpu}
        for role, seconds in self.roles.items():
            out[STAGE_OF_ROLE.get(role, "register+publish")] += seconds
        return out

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "stages": self.stages(), "total_cpu": self.total_cpu}


def _median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


def idle_rates(phases: list[dict[str, Any]]) -> dict[str, float]:
    """CPU seconds per second of each role over every idle window."""
    seconds = sum(p.get("idle_seconds", 0.0) for p in phases)
    if seconds <= 0:
        return {}
    totals: Counter[str] = Counter()
    for p in phases:
        totals.update(p.get("idle", {}))
    return {role: cpu / seconds for role, cpu in totals.items()}


def clean_phases(phases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steady exposures (the first is warm-up) that ended before the next readout: an
    exposure still in flight when the next one started would count that one's CPU as its own."""
    last = max((p["index"] for p in phases), default=0)
    steady = [p for p in phases if p["index"] > 0] or phases
    alone = [p for p in steady if p.get("idle_seconds", 0) > 0 or p["index"] == last]
    return alone or steady


def busy_per_ccd(phases: list[dict[str, Any]], ccds: int, rates: dict[str, float]) -> dict[str, float]:
    """Busy CPU seconds per CCD by role over the steady exposures that did not overlap the
    next one, the role's idle rate over the busy window taken off."""
    steady = clean_phases(phases)
    out: dict[str, list[float]] = {}
    for p in steady:
        for role, cpu in p["busy"].items():
            work = cpu - rates.get(role, 0.0) * p["busy_seconds"]
            out.setdefault(role, []).append(max(0.0, work) / max(1, ccds))
    return {role: _median(values) for role, values in out.items()}


def background_cores(phases: list[dict[str, Any]]) -> float:
    """Cores other users took while exposures were in flight (steady exposures)."""
    steady = clean_phases(phases)
    seconds = sum(p["busy_seconds"] for p in steady)
    return sum(p["busy"].get("others", 0.0) for p in steady) / seconds if seconds > 0 else 0.0


def calibrate(path: str, one: dict[str, Any], many: dict[str, Any]) -> Calibration:
    """A calibration from two harness results (JSON of ``bench transfer --end-to-end``): ``one``
    with 1 CCD per exposure (for ``L1``), ``many`` with N (for the per-CCD demands)."""
    phases = many["cpu"]["phases"]
    rates = idle_rates(phases)
    per_ccd = busy_per_ccd(phases, many["ccds"], rates)
    records = [r for r in many["records"] if r["exposure_index"] > 0 and not r["error"]]
    compress = _median(r.get("compress_cpu_seconds", 0.0) for r in records)
    send = _median(r.get("send_cpu_seconds", 0.0) for r in records)
    roles = {role: cpu for role, cpu in per_ccd.items() if role not in NOT_OURS and role != "edge_workers"}
    send += roles.pop("edge_service", 0.0)
    first, when = min(one["exposures"]), datetime.fromisoformat
    latencies = [  # readout -> announced of the later exposures' CCDs
        (when(a["published"]) - when(a["readout"])).total_seconds()
        for a in one.get("arrivals", [])
        if a["exposure"] != first
    ]
    if not latencies:
        raise ValueError("the 1-CCD calibration run announced nothing after its warm-up")
    return Calibration(
        path=path,
        cores=many["cpu"]["cores"] or 1,
        ccds=many["ccds"],
        compress_cpu=compress,
        send_cpu=send,
        roles=roles,
        idle_rates={k: v for k, v in rates.items() if k not in NOT_OURS},
        background=background_cores(phases),
        latency_one=max(latencies),
        raw_bytes=int(_median(r["raw_bytes"] for r in records)),
        compressed_bytes=int(_median(r["bytes"] for r in records)),
        edge_workers=many.get("workers", 0),
    )


@dataclass(frozen=True)
class Prediction:
    ccds: int
    max_latency: float
    bottleneck: str
    #: seconds each further CCD adds at each resource (D_r / c_r)
    per_ccd: dict[str, float] = field(default_factory=dict)


def predict_here(
    cal: Calibration, ccds: int, workers: int | None = None, background: float | None = None
) -> Prediction:
    """Max readout -> announced of ``ccds`` CCDs read out together on the calibration's machine
    (``workers`` and other users' ``background`` cores: as during the calibration by default)."""
    busy = cal.background if background is None else background
    idle = sum(cal.idle_rates.get(r, 0.0) for r in cal.roles)
    cores = max(0.25, cal.cores - busy - idle)
    workers = workers or cal.edge_workers or ccds
    # each resource's (CPU seconds per CCD, CCDs it serves at once)
    demands = {
        "shared cores": (cal.total_cpu, cores),
        "edge workers": (cal.edge_cpu, max(0.25, min(workers, cores))),
    }
    for role, label in SINGLE_CORE_ROLES.items():
        if role in cal.roles:
            demands[label] = (cal.roles[role], 1.0)
    rates = {label: demand / servers for label, (demand, servers) in demands.items()}
    beyond = {label: max(0.0, ccds * rates[label] - demand) for label, (demand, _) in demands.items()}
    bottleneck = max(demands, key=lambda k: (beyond[k], rates[k]))
    return Prediction(ccds, cal.latency_one + beyond[bottleneck], bottleneck, rates)


@dataclass(frozen=True)
class Sizing:
    """What ``detectors`` CCDs read out together need so the last is announced within
    ``limit`` seconds."""

    limit: float
    slack: float
    feasible: bool
    edge_cores: int
    edge_nodes: int
    register_instances: int
    #: Gbit/s edge -> facility while an exposure is in flight
    bandwidth_gbit_s: float
    predicted_max: float


def servers_for(count: int, demand: float, slack: float) -> int:
    """Fewest servers (each one CCD at a time) so the last of ``count`` CCDs, each needing
    ``demand`` seconds, starts within ``slack``: ``(ceil(count / c) - 1) * demand <= slack``."""
    if count <= 1 or demand <= 0:
        return 1
    per_server = math.floor(slack / demand) + 1
    return max(1, math.ceil(count / per_server))


def size_for(
    cal: Calibration,
    detectors: int,
    limit: float,
    cores_per_node: int,
    cpu_scale: float = 1.0,
    extra_latency: float = 0.0,
) -> Sizing:
    """Edge cores and nodes, register function instances and bandwidth for ``limit``."""
    floor = cal.latency_one + extra_latency
    slack = limit - floor
    edge = cal.edge_cpu * cpu_scale
    register = cal.stages()["register+publish"] * cpu_scale
    if slack <= 0:
        return Sizing(limit, slack, False, 0, 0, 0, math.inf, floor)
    cores = servers_for(detectors, edge, slack)
    instances = servers_for(detectors, register, slack)
    bits = cal.compressed_bytes * 8 * detectors
    bandwidth = bits / slack / 1e9
    worst = max(
        (math.ceil(detectors / cores) - 1) * edge,
        (math.ceil(detectors / instances) - 1) * register,
        bits / (bandwidth * 1e9),
    )
    return Sizing(
        limit,
        round(slack, 3),
        True,
        cores,
        math.ceil(cores / cores_per_node),
        instances,
        round(bandwidth, 2),
        round(floor + worst, 3),
    )


def camera_report(
    cal: Calibration,
    detectors: int,
    cadence: float,
    budget: float,
    target: float,
    cores_per_node: int,
    cpu_scale: float = 1.0,
    extra_latency: float = 0.0,
) -> dict[str, Any]:
    """The sizing for the per-CCD budget and the whole-exposure target, and what the cadence
    implies (sustained bandwidth, utilisation)."""
    per_ccd = size_for(cal, detectors, budget, cores_per_node, cpu_scale, extra_latency)
    whole = size_for(cal, detectors, target, cores_per_node, cpu_scale, extra_latency)
    need = per_ccd if per_ccd.feasible else whole
    stages = {k: round(v * cpu_scale, 4) for k, v in cal.stages().items()}
    return {
        "detectors": detectors,
        "cadence_s": cadence,
        "raw_bytes_per_exposure": cal.raw_bytes * detectors,
        "compressed_bytes_per_exposure": cal.compressed_bytes * detectors,
        "cpu_per_ccd_by_stage": stages,
        "per_ccd_budget": asdict(per_ccd),
        "whole_exposure_target": asdict(whole),
        "sustained_gbit_s": round(cal.compressed_bytes * 8 * detectors / cadence / 1e9, 3),
        "edge_utilisation": round(
            detectors * cal.edge_cpu * cpu_scale / max(1, need.edge_cores) / cadence, 3
        ),
        "managed_services_cpu_per_exposure": {
            k: round(stages[k] * detectors, 2) for k in ("store", "notify")
        },
    }


def format_camera(report: dict[str, Any], name: str) -> str:
    b, w = report["per_ccd_budget"], report["whole_exposure_target"]
    rows = {
        "edge cores": "edge_cores",
        "edge nodes": "edge_nodes",
        "register function instances": "register_instances",
        "bandwidth edge -> facility, Gbit/s": "bandwidth_gbit_s",
        "predicted last CCD announced, s": "predicted_max",
    }
    cells = {k: [str(s[k]) if s["feasible"] else "impossible" for s in (b, w)] for k in rows.values()}
    lines = [
        f"{name}: {report['detectors']} detectors every {report['cadence_s']} s; "
        f"{report['compressed_bytes_per_exposure'] / 1e9:.2f} GB compressed per exposure "
        f"({report['raw_bytes_per_exposure'] / 1e9:.1f} GB raw)",
        "",
        "| | every CCD within the budget | whole exposure within the target |",
        "| --- | ---: | ---: |",
        f"| limit, s (slack after one CCD's own pipeline) | {b['limit']} ({b['slack']}) "
        f"| {w['limit']} ({w['slack']}) |",
        *(f"| {label} | {cells[key][0]} | {cells[key][1]} |" for label, key in rows.items()),
        "",
        "CPU seconds per CCD by stage (measured here): "
        + ", ".join(f"{k} {v:.3f}" for k, v in report["cpu_per_ccd_by_stage"].items()),
        f"Sustained bandwidth at the cadence: {report['sustained_gbit_s']} Gbit/s; edge cores "
        f"busy {report['edge_utilisation'] * 100:.0f}% of the cadence. Managed services (not "
        "sized; the emulators' CPU here, per exposure): "
        + ", ".join(f"{k} {v} s" for k, v in report["managed_services_cpu_per_exposure"].items()),
    ]
    return "\n".join(lines)


def camera_detectors(camera: str) -> int:
    """LSSTCam, LSSTComCam, LATISS or a number of detectors."""
    if camera in CAMERAS:
        return CAMERAS[camera]
    try:
        count = int(camera)
    except ValueError:
        raise ValueError(f"camera {camera!r}: one of {', '.join(CAMERAS)} or a number") from None
    if count < 1:
        raise ValueError("a camera has at least one detector")
    return count
