"""The presence answers about a CCD and an exposure, pure logic (the queries are ``presence.py``)
and the presence API's JSON bodies (``Field`` descriptions feed OpenAPI). Expected: the manifest's
detectors, else every detector of the instrument; latency p50/p95 by linear interpolation, as the
Beam summaries (numpy) do; status ``incomplete`` > ``over_budget`` > ``complete``, Beam's precedence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from obsingest.timescales import as_utc

Status = Literal["complete", "incomplete", "over_budget"]
COMPLETE: Final = "complete"
INCOMPLETE: Final = "incomplete"
OVER_BUDGET: Final = "over_budget"

FROM_MANIFEST: Final = "manifest"
FROM_INSTRUMENT: Final = "instrument"
ExpectedSource = Annotated[
    Literal["manifest", "instrument"],
    Field(
        description="manifest: the exposure's ExposureManifest; instrument: no manifest was "
        "recorded, every detector of the instrument is expected"
    ),
]


@dataclass(frozen=True)
class CcdPresence:
    """Is this CCD registered, and if so where, when and how late."""

    instrument: str
    exposure: int
    detector: int
    day_obs: int
    registered: bool
    dataset_id: Annotated[str | None, Field(description="deterministic UUID of the dataset")] = None
    dataset_type: str | None = None
    run: str | None = None
    uri: str | None = None
    size: int | None = None
    checksum: str | None = None
    transport: str | None = None
    readout_time: datetime | None = None
    registered_time: datetime | None = None
    latency_seconds: Annotated[float | None, Field(description="readout -> registered")] = None
    over_budget: bool | None = None


@dataclass(frozen=True)
class ExposurePresence:
    """One exposure: expected against registered, latencies, status."""

    instrument: str
    exposure: int
    day_obs: int
    expected: int
    expected_source: ExpectedSource
    registered: int
    missing: tuple[int, ...]
    budget_seconds: float
    status: Annotated[
        Status,
        Field(
            description="incomplete (an expected detector is missing) > over_budget (a CCD took "
            "longer than the budget) > complete"
        ),
    ]
    unexpected: Annotated[
        tuple[int, ...],
        Field(description="registered detectors the manifest did not list (counted in registered)"),
    ] = ()
    over_budget: Annotated[
        tuple[int, ...], Field(description="detectors registered later than the budget")
    ] = ()
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_max: float | None = None
    latency_unknown: Annotated[
        int, Field(description="registered CCDs without a readout time (not in the percentiles)")
    ] = 0
    first_readout: datetime | None = None
    last_registered: datetime | None = None
    physical_filter: str | None = None
    obs_start: datetime | None = None
    exposure_time: float | None = None
    note: str = ""

    @property
    def made_budget(self) -> bool:
        return self.status == COMPLETE


@dataclass(frozen=True)
class NightPage:
    """A page of a night's exposures, ascending; ``next_after`` continues it (None: last)."""

    instrument: str
    day_obs: int
    exposures: list[ExposurePresence] = field(default_factory=list)
    next_after: int | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``, as ``numpy.percentile``'s default."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def manifest_detectors(text: str) -> list[int]:
    """A manifest's detectors as ``exposure_manifest`` keeps them ("0,1,2")."""
    return [int(x) for x in text.split(",") if x]


def status_of(missing: Iterable[int], over_budget: Iterable[int]) -> Status:
    if any(True for _ in missing):
        return INCOMPLETE
    if any(True for _ in over_budget):
        return OVER_BUDGET
    return COMPLETE


def from_times(rows: Sequence[tuple[int, datetime | None, datetime | None]]) -> dict[str, Any]:
    """``summarize``'s ``registered`` and the exposure's first readout and last registration
    (UTC), from each registered CCD's (detector, registered time, readout time) as the database
    gives them (naive UTC on SQLite)."""
    return {
        "registered": [(det, (i - r).total_seconds() if i and r else None) for det, i, r in rows],
        "first_readout": as_utc(min((r for _, _, r in rows if r is not None), default=None)),
        "last_registered": as_utc(max((i for _, i, _ in rows if i is not None), default=None)),
    }


def summarize(
    instrument: str,
    exposure: int,
    day_obs: int,
    expected: Sequence[int],
    expected_source: Literal["manifest", "instrument"],
    registered: Sequence[tuple[int, float | None]],
    budget_seconds: float,
    **details: object,
) -> ExposurePresence:
    """The exposure's answer from its expected detectors and each registered CCD's (detector,
    latency); ``details``: the descriptive fields (times, filter, note)."""
    have = {det for det, _ in registered}
    want = set(expected)
    latencies = sorted(lat for _, lat in registered if lat is not None)
    late = tuple(sorted(det for det, lat in registered if lat is not None and lat > budget_seconds))
    missing = tuple(sorted(want - have))
    if expected_source == FROM_INSTRUMENT and not details.get("note"):
        details["note"] = (
            f"no manifest recorded for this exposure: expected is every detector of "
            f"{instrument} ({len(want)})"
        )
    return ExposurePresence(
        instrument=instrument,
        exposure=exposure,
        day_obs=day_obs,
        expected=len(want),
        expected_source=expected_source,
        registered=len(have),
        missing=missing,
        unexpected=tuple(sorted(have - want)),
        over_budget=late,
        budget_seconds=budget_seconds,
        status=status_of(missing, late),
        latency_p50=percentile(latencies, 50) if latencies else None,
        latency_p95=percentile(latencies, 95) if latencies else None,
        latency_max=latencies[-1] if latencies else None,
        latency_unknown=sum(1 for _, lat in registered if lat is None),
        **details,  # type: ignore[arg-type]
    )
