"""The presence API's own JSON bodies (OpenAPI and serialisation); a CCD's and an exposure's answers
are the registry's records themselves (``obsingest.registry.completeness``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from obsingest.registry.completeness import ExpectedSource, Status


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


class NightExposure(BaseModel):
    """One exposure of a night, counts only (its own endpoint has the lists)."""

    model_config = ConfigDict(from_attributes=True)

    exposure: int
    expected: int
    expected_source: ExpectedSource
    registered: int
    missing: int
    over_budget: int
    latency_p95: float | None = None
    latency_max: float | None = None
    status: Status

    @field_validator("missing", "over_budget", mode="before")
    @classmethod
    def _counted(cls, value: Any) -> Any:
        return len(value) if isinstance(value, (tuple, list)) else value


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
