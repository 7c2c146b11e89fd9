"""Per-exposure latency and completeness, the pure computation both pipeline modes share: no Beam
here, so the rules are testable by hand and batch and streaming cannot drift apart (both end in
:func:`summarize_exposure`; the rules: ``beam_jobs/README.md``, "The numbers").
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, cast

import numpy as np

from obsingest import defaults
from obsingest.avro import EPOCH
from obsingest.messages import (
    ArrivalEvent,
    ExposureManifest,
    ExposureSummary,
    SummaryStatus,
    SummaryStatusName,
    utcnow,
)
from obsingest.timescales import PIPELINE_SCALE

_MICRO = timedelta(microseconds=1)

#: Triggers, as written into ExposureSummary.trigger.
TRIGGER_BATCH = "batch"
TRIGGER_ALL_ARRIVED = "all-arrived"
TRIGGER_DEADLINE = "deadline"
TRIGGER_LATE = "late-arrival"

#: Statuses that are budget breaches and also go to the ``budget-alerts`` output.
BREACH_STATUSES = frozenset({SummaryStatus.OVER_BUDGET, SummaryStatus.INCOMPLETE})
#: The time scale of every latency here: readout and publication are both UTC instants.
LATENCY_SCALE = PIPELINE_SCALE

ExposureKey = tuple[str, int]


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch (the wire precision of timestamp-micros)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // _MICRO


def from_micros(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


class Arrival(NamedTuple):
    """The part of an ArrivalEvent the summary needs, as primitives (cheap to shuffle in Beam)."""

    dataset_id: str
    instrument: str
    exposure: int
    detector: int
    day_obs: int
    readout_us: int
    published_us: int

    @property
    def key(self) -> ExposureKey:
        return (self.instrument, self.exposure)

    @property
    def latency(self) -> float:
        return (self.published_us - self.readout_us) / 1e6

    @classmethod
    def from_event(cls, event: ArrivalEvent) -> Arrival:
        return cls.from_record(vars(event))

    @classmethod
    def from_record(cls, record: dict) -> Arrival:
        """From an ArrivalEvent's fields, as a dict (fastavro's record: times as datetime or micros)."""
        return cls(
            str(record["dataset_id"]),
            record["instrument"],
            int(record["exposure"]),
            int(record["detector"]),
            int(record["day_obs"]),
            _micros_of(record["readout_time"]),
            _micros_of(record["published_time"]),
        )


def _micros_of(value: datetime | int) -> int:
    return value if isinstance(value, int) else to_micros(value)


def as_arrival(item: ArrivalEvent | Arrival) -> Arrival:
    return item if isinstance(item, Arrival) else Arrival.from_event(item)


def manifest_key(manifest: ExposureManifest) -> ExposureKey:
    return (manifest.instrument, int(manifest.exposure))


def dedupe(arrivals: Iterable[ArrivalEvent | Arrival], expected: Iterable[int] | None) -> dict[int, Arrival]:
    """One arrival per detector (of ``expected``, if given): earliest publication wins, over
    dataset ids and over runs."""
    by_dataset: dict[str, Arrival] = {}
    for item in arrivals:
        arrival = as_arrival(item)
        seen = by_dataset.get(arrival.dataset_id)
        if seen is None or (arrival.published_us, arrival.readout_us) < (seen.published_us, seen.readout_us):
            by_dataset[arrival.dataset_id] = arrival
    survivors = by_dataset.values()
    by_detector = {a.detector: a for a in survivors}
    if len(by_detector) != len(by_dataset):
        # several dataset ids for one detector (two runs; the usual case has one): ties by dataset id
        by_detector = {}
        for arrival in sorted(survivors, key=lambda a: (a.published_us, a.dataset_id)):
            by_detector.setdefault(arrival.detector, arrival)
    if expected is None:
        return by_detector
    wanted = set(expected)
    return {d: a for d, a in by_detector.items() if d in wanted}


def summarize_exposure(
    manifest: ExposureManifest | None,
    arrivals: Iterable[ArrivalEvent | Arrival],
    budget: float = defaults.BUDGET_SECONDS,
    *,
    key: ExposureKey | None = None,
    revision: int = 0,
    trigger: str = TRIGGER_BATCH,
) -> ExposureSummary:
    """The ExposureSummary of one exposure from its manifest (or None) and its arrivals; ``key``
    (instrument, exposure) names it when there is neither."""
    arrivals = [as_arrival(a) for a in arrivals]
    expected = sorted(set(manifest.detectors)) if manifest is not None else None
    counted = dedupe(arrivals, expected)
    if manifest is not None:
        instrument, exposure = manifest_key(manifest)
        day_obs: int | None = int(manifest.day_obs)
    elif arrivals:
        instrument, exposure = cast(Arrival, arrivals[0]).key  # as_arrival'd above
        day_obs = arrivals[0].day_obs
    elif key is not None:
        instrument, exposure = key
        day_obs = None
    else:
        raise ValueError("summarize_exposure needs a manifest, an arrival or a key")

    ccds = list(counted.values())
    # Arrival.latency written out: this runs once per CCD of every exposure.
    latencies = {d: (a.published_us - a.readout_us) / 1e6 for d, a in counted.items()}
    values = np.fromiter(latencies.values(), dtype=float, count=len(latencies))
    over = sorted(d for d, lat in latencies.items() if lat > budget)
    missing = [d for d in expected if d not in counted] if expected is not None else []
    status: SummaryStatusName
    if expected is None:
        status = SummaryStatus.NO_MANIFEST
    elif missing:
        status = SummaryStatus.INCOMPLETE
    elif over:
        status = SummaryStatus.OVER_BUDGET
    else:
        status = SummaryStatus.OK
    has = values.size > 0
    # One percentile call for both ranks: the same linear interpolation as two calls.
    p50, p95 = (float(v) for v in np.percentile(values, (50, 95))) if has else (None, None)
    return ExposureSummary(
        instrument=instrument,
        exposure=int(exposure),
        day_obs=day_obs,
        expected=len(expected) if expected is not None else None,
        arrived=len(counted),
        # 1.0 for a manifest that expects nothing
        completeness=(len(counted) / len(expected) if expected else 1.0) if expected is not None else None,
        latency_p50=p50,
        latency_p95=p95,
        latency_max=float(values.max()) if has else None,
        budget_seconds=float(budget),
        over_budget=over,
        missing_detectors=missing,
        status=status,
        first_readout=from_micros(min(a.readout_us for a in ccds)) if ccds else None,
        last_arrival=from_micros(max(a.published_us for a in ccds)) if ccds else None,
        revision=revision,
        trigger=trigger,
        emitted_time=utcnow(),
    )


def is_breach(summary: ExposureSummary) -> bool:
    """Whether the summary belongs on the ``budget-alerts`` output."""
    return summary.status in BREACH_STATUSES


_VOLATILE = ("revision", "trigger", "emitted_time")


def content(summary: ExposureSummary) -> dict:
    """The summary without when/why it was emitted: what batch and streaming must agree on."""
    return {name: value for name, value in summary.to_record().items() if name not in _VOLATILE}


def same_content(a: ExposureSummary, b: ExposureSummary) -> bool:
    return content(a) == content(b)
