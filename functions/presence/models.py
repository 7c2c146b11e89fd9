"""The presence API's JSON bodies, as pydantic models: FastAPI writes them into the OpenAPI
description (what Schemathesis checks every answer against) and serialises through them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["complete", "incomplete", "over_budget"]


class ApiError(BaseModel):
    """Every 4xx/5xx this API answers itself."""

    error: str = Field(description="short reason, e.g. unknown-detector, bad-exposure-id")
    message: str = Field(description="what was wrong, naming the offending input")


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class InvalidRequest(ApiError):
    """A parameter that does not fit its declared type or range (422)."""

    detail: list[ValidationIssue]


class Ccd(BaseModel):
    """Is this CCD registered; if so, its dataset, object and latency."""

    instrument: str
    exposure: int
    detector: int
    day_obs: int
    registered: bool
    dataset_id: str | None = Field(None, description="deterministic UUID of the dataset")
    dataset_type: str | None = None
    run: str | None = None
    uri: str | None = None
    size: int | None = None
    checksum: str | None = None
    transport: str | None = None
    readout_time: datetime | None = None
    registered_time: datetime | None = None
    latency_seconds: float | None = Field(None, description="readout -> registered")
    over_budget: bool | None = None


class Exposure(BaseModel):
    """Expected against registered, readout -> registered latencies, status."""

    instrument: str
    exposure: int
    day_obs: int
    expected: int
    expected_source: Literal["manifest", "instrument"] = Field(
        description="manifest: the exposure's ExposureManifest; instrument: no manifest was "
        "recorded, every detector of the instrument is expected"
    )
    registered: int
    missing: list[int]
    unexpected: list[int] = Field(description="registered detectors the manifest did not list")
    over_budget: list[int] = Field(description="detectors registered later than the budget")
    budget_seconds: float
    status: Status = Field(
        description="incomplete (an expected detector is missing) > over_budget (a CCD took "
        "longer than the budget) > complete"
    )
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_max: float | None = None
    latency_unknown: int = Field(0, description="registered CCDs without a readout time")
    first_readout: datetime | None = None
    last_registered: datetime | None = None
    physical_filter: str | None = None
    obs_start: datetime | None = None
    exposure_time: float | None = None
    note: str = ""


class NightExposure(BaseModel):
    """One exposure of a night, counts only (its own endpoint has the lists)."""

    exposure: int
    expected: int
    expected_source: Literal["manifest", "instrument"]
    registered: int
    missing: int
    over_budget: int
    latency_p95: float | None = None
    latency_max: float | None = None
    status: Status


class Night(BaseModel):
    """A page of a night's exposures in id order; pass ``next_after`` as ``after`` for the next
    page (null: this is the last)."""

    instrument: str
    day_obs: int
    limit: int
    exposures: list[NightExposure]
    next_after: int | None = None


class Health(BaseModel):
    status: Literal["ok"]
    registry: str = Field(description="the registry's database, password hidden")
