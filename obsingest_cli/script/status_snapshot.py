"""One snapshot of the night for ``obsingest status``: the registry's newest exposures and recent
quarantines, and the METRICS each ``--metrics URL`` exports (absent when a process does not)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from obsingest.registry.completeness import ExposurePresence
from obsingest.registry.presence import PresenceReader

MADE_BUDGET, MISSED_BUDGET, NOTHING_TO_JUDGE = 0, 1, 2

#: (what the view calls it, sample name in the catalogue, label to break it down by)
METRICS: tuple[tuple[str, str, str | None], ...] = (
    ("dead-lettered", "obsingest_ccds_dead_lettered_total", "reason"),
    ("dead letters waiting", "obsingest_dead_letters_waiting", "source"),
    ("quarantined (counted by processes)", "obsingest_ccds_quarantined_total", "reason"),
    ("spooled at the edge", "obsingest_edge_spool_ccds", "state"),
    ("oldest unacknowledged at the edge (s)", "obsingest_edge_oldest_unacknowledged_age_seconds", None),
    ("assembler consumer lag (records)", "obsingest_assembler_consumer_lag_messages", None),
)
#: spool states that are done with (not "spooled")
_SETTLED = {"acknowledged", "quarantined"}


@dataclass
class MetricsSource:
    url: str
    up: bool
    error: str = ""
    #: view name -> (total, {label value: value})
    values: dict[str, tuple[float, dict[str, float]]] = field(default_factory=dict)


@dataclass
class Snapshot:
    taken: datetime
    registry: str
    budget_seconds: float
    exposures: list[ExposurePresence]
    quarantine: dict[str, Any]
    metrics: list[MetricsSource] = field(default_factory=list)
    error: str = ""

    @property
    def last(self) -> ExposurePresence | None:
        return self.exposures[0] if self.exposures else None

    @property
    def exit_code(self) -> int:
        if self.last is None:
            return NOTHING_TO_JUDGE
        return MADE_BUDGET if self.last.made_budget else MISSED_BUDGET


def parse_metrics(text: str) -> dict[str, tuple[float, dict[str, float]]]:
    """The METRICS found in a Prometheus text exposition: total and breakdown per label."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {sample: (name, label) for name, sample, label in METRICS}
    found: dict[str, tuple[float, dict[str, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in wanted:
                continue
            name, label = wanted[sample.name]
            total, parts = found.get(name, (0.0, {}))
            key = sample.labels.get(label, "") if label else ""
            if sample.name == "obsingest_edge_spool_ccds" and key in _SETTLED:
                continue
            parts = {**parts, key: parts.get(key, 0.0) + sample.value} if label else parts
            found[name] = (total + sample.value, parts)
    return found


def scrape(url: str, timeout: float = 2.0) -> MetricsSource:
    import requests

    try:
        reply = requests.get(url, timeout=timeout)
        reply.raise_for_status()
        return MetricsSource(url, True, values=parse_metrics(reply.text))
    except Exception as exc:  # a process down is what the view must show, not a crash
        return MetricsSource(url, False, error=f"{type(exc).__name__}: {exc}"[:200])


def take(reader: PresenceReader, metrics_urls: list[str], exposures: int, since: timedelta) -> Snapshot:
    """One snapshot; a registry that cannot be read is reported in ``error``."""
    where = reader.source
    now = datetime.now(UTC)
    sources = [scrape(url) for url in metrics_urls]
    try:
        latest = reader.latest(exposures)
        quarantine = reader.quarantine(since=now - since)
    except Exception as exc:
        return Snapshot(now, where, reader.budget_seconds, [], {}, sources, f"{exc}"[:300])
    return Snapshot(now, where, reader.budget_seconds, latest, quarantine, sources)


def as_json(snapshot: Snapshot) -> str:
    out = asdict(snapshot)
    out["exit_code"] = snapshot.exit_code
    return json.dumps(out, default=str, indent=2)
