"""Typed views of the Avro contracts in ``schemas/``, field for field as the newest version.
Timestamps are tz-aware UTC datetimes (microsecond precision, as on the wire).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Literal, Self

from obsingest import avro
from obsingest.dataid import DataId


def utcnow() -> datetime:
    """Now, UTC, truncated to what timestamp-micros carries."""
    return datetime.now(UTC)


class _Message:
    SCHEMA: ClassVar[str]
    #: fields that are strings on the wire (Avro ``uuid``) and ``uuid.UUID`` here
    UUID_FIELDS: ClassVar[tuple[str, ...]] = ()

    def to_record(self) -> dict[str, Any]:
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name in self.UUID_FIELDS:
            record[name] = str(record[name])
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        values = {k: v for k, v in record.items() if k in names}
        for name in cls.UUID_FIELDS:
            if name in values and not isinstance(values[name], uuid.UUID):
                values[name] = uuid.UUID(str(values[name]))
        return cls(**values)

    def encode(self) -> bytes:
        return avro.encode(self.SCHEMA, self.to_record())

    @classmethod
    def decode(cls, message: bytes) -> Self:
        _, record = avro.decode(message, expect=cls.SCHEMA)
        return cls.from_record(record)


@dataclass(frozen=True)
class ExposureManifest(_Message):
    SCHEMA: ClassVar[str] = "ExposureManifest"

    instrument: str
    exposure: int
    day_obs: int
    detectors: list[int]
    obs_start: datetime
    exposure_time: float
    filter: str
    published: datetime


@dataclass(frozen=True)
class CcdChunk(_Message):
    SCHEMA: ClassVar[str] = "CcdChunk"

    instrument: str
    exposure: int
    detector: int
    day_obs: int
    chunk_index: int
    chunk_count: int
    total_size: int
    file_checksum: str
    chunk_checksum: str
    readout_time: datetime
    payload: bytes
    compressed_time: datetime | None = None
    producer: str = ""

    @property
    def data_id(self) -> DataId:
        return DataId(self.instrument, self.exposure, self.detector)


@dataclass(frozen=True)
class ArrivalEvent(_Message):
    SCHEMA: ClassVar[str] = "ArrivalEvent"
    UUID_FIELDS: ClassVar[tuple[str, ...]] = ("dataset_id",)

    dataset_id: uuid.UUID
    dataset_type: str
    run: str
    instrument: str
    exposure: int
    detector: int
    day_obs: int
    uri: str
    size: int
    checksum: str
    transport: str
    readout_time: datetime
    registered_time: datetime
    published_time: datetime
    compressed_time: datetime | None = None
    stored_time: datetime | None = None

    @property
    def data_id(self) -> DataId:
        return DataId(self.instrument, self.exposure, self.detector)

    @property
    def latency(self) -> float:
        """Seconds from readout to announcement: the figure the 5 s budget is about."""
        return (self.published_time - self.readout_time).total_seconds()


IngestedStatusName = Literal["ok", "over_budget"]


class IngestedStatus:
    """``ExposureIngested.status``: the words of the metrics' ``status`` label."""

    OK: Final = "ok"
    OVER_BUDGET: Final = "over_budget"


@dataclass(frozen=True)
class ExposureIngested(_Message):
    """One per exposure, when the last CCD its manifest expects is registered (see the
    contract's doc and ``obsingest.registry.ingested``)."""

    SCHEMA: ClassVar[str] = "ExposureIngested"
    UUID_FIELDS: ClassVar[tuple[str, ...]] = ("event_id",)

    event_id: uuid.UUID
    instrument: str
    exposure: int
    day_obs: int
    dataset_type: str
    run: str
    expected: int
    registered: int
    detectors: list[int]
    missing_detectors: list[int]
    over_budget: list[int]
    last_registered: datetime
    budget_seconds: float
    status: IngestedStatusName
    manifest_known: bool
    published_time: datetime
    first_readout: datetime | None = None
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_max: float | None = None

    @property
    def complete(self) -> bool:
        return not self.missing_detectors


SummaryStatusName = Literal["OK", "OVER_BUDGET", "INCOMPLETE", "NO_MANIFEST"]


class SummaryStatus:
    OK: Final = "OK"
    OVER_BUDGET: Final = "OVER_BUDGET"
    INCOMPLETE: Final = "INCOMPLETE"
    NO_MANIFEST: Final = "NO_MANIFEST"


@dataclass(frozen=True)
class ExposureSummary(_Message):
    SCHEMA: ClassVar[str] = "ExposureSummary"

    instrument: str
    exposure: int
    arrived: int
    budget_seconds: float
    status: SummaryStatusName
    emitted_time: datetime
    day_obs: int | None = None
    expected: int | None = None
    completeness: float | None = None
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_max: float | None = None
    over_budget: list[int] = field(default_factory=list)
    missing_detectors: list[int] = field(default_factory=list)
    first_readout: datetime | None = None
    last_arrival: datetime | None = None
    revision: int = 0
    trigger: str = "batch"

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-friendly form (ISO timestamps) for JSON-lines output."""
        out = self.to_record()
        for key, value in out.items():
            if isinstance(value, datetime):
                out[key] = value.isoformat()
        return out

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Self:
        fixed = dict(data)
        for key in ("emitted_time", "first_readout", "last_arrival"):
            if isinstance(fixed.get(key), str):
                fixed[key] = datetime.fromisoformat(fixed[key])
        return cls.from_record(fixed)
