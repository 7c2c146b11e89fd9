"""Statistics and tables of a harness run, in the observatory transfer report's columns (pure).

Transfer time of a CCD = end - start (read + compress + send, from the moment a worker takes it);
send time = end - compressed. An exposure's aggregate Mbit/s relates its bytes to its span as the
report's bandwidth row does to its max row (16 x 15.1 MB * 8 / 1.53 s = 1270); over several
exposures, the median.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from obsingest.registry.completeness import percentile
from producers.sender import SendStatus


def _iso_json(record: Any) -> dict[str, Any]:
    """A record's fields as JSON values, datetimes as ISO 8601."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(record).items()}


@dataclass(frozen=True)
class TransferRecord:
    """One CCD moved by one worker: what the worker's JSON log line says."""

    data_id: str
    worker: int
    detector: int
    exposure: int
    exposure_index: int
    readout: datetime
    start: datetime
    read_end: datetime
    compressed: datetime
    end: datetime
    bytes: int
    raw_bytes: int
    status: SendStatus | Literal["", "failed"]
    error: str = ""
    #: CPU seconds the worker process used for this CCD (all its threads)
    cpu_seconds: float = 0.0
    #: of which reading (+ compressing), and sending (checksum, journal, transport client)
    compress_cpu_seconds: float = 0.0
    send_cpu_seconds: float = 0.0
    #: the edge worker process that handled it
    worker_pid: int = 0

    @property
    def queued_seconds(self) -> float:
        """Readout -> a worker took it (the edge's queue, when CCDs outnumber workers)."""
        return (self.start - self.readout).total_seconds()

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    @property
    def send_seconds(self) -> float:
        return (self.end - self.compressed).total_seconds()

    @property
    def ok(self) -> bool:
        return not self.error

    def to_json(self) -> dict[str, Any]:
        return _iso_json(self)


def record_of(
    outcome: Any,
    detector: int,
    exposure: int,
    exposure_index: int,
    readout: datetime,
    workers: dict[int, int],
) -> TransferRecord:
    """An edge ``Outcome`` (the worker's own step times and CPU seconds) as a record; ``workers``:
    worker pid -> index."""
    ccd: dict[str, Any] = dict(
        data_id=outcome.key,
        detector=detector,
        exposure=exposure,
        exposure_index=exposure_index,
        readout=readout,
    )
    if not outcome.ok:
        reason = f"{outcome.reason}: " if outcome.reason else ""
        return TransferRecord(
            **ccd | dict.fromkeys(("start", "read_end", "compressed", "end"), readout),
            worker=-1,
            bytes=0,
            raw_bytes=0,
            status="failed",
            error=f"{outcome.state}: {reason}{outcome.error or 'not acknowledged'}",
        )
    start = outcome.started_time or readout
    return TransferRecord(
        **ccd,
        worker=workers.get(outcome.worker_pid, -1),
        start=start,
        read_end=start + timedelta(seconds=outcome.read_seconds),
        compressed=outcome.compressed_time or start,
        end=outcome.acked_time or start,
        bytes=outcome.size,
        raw_bytes=outcome.raw_size,
        status=outcome.status,
        cpu_seconds=round(outcome.cpu_seconds, 4),
        compress_cpu_seconds=round(outcome.read_compress_cpu_seconds, 4),
        send_cpu_seconds=round(outcome.send_cpu_seconds, 4),
        worker_pid=outcome.worker_pid,
    )


@dataclass(frozen=True)
class TransferRow:
    """One line of the report's table: CCDs per exposure and the spread of transfer times."""

    ccds: int
    exposures: int
    transfers: int
    min: float
    mean: float
    max: float
    mbit_s: float
    send_min: float
    send_mean: float
    send_max: float
    failed: int = 0
    #: readout -> taken by an edge worker, and readout -> acknowledged by the destination
    queued_max: float = 0.0
    acked_max: float = 0.0


def aggregate_mbit_s(records: Iterable[TransferRecord]) -> float:
    """Bytes of one exposure's transfers * 8 / their span (first start to last end), Mbit/s."""
    done = [r for r in records if r.ok]
    if not done:
        return 0.0
    span = (max(r.end for r in done) - min(r.start for r in done)).total_seconds()
    return sum(r.bytes for r in done) * 8 / 1e6 / span if span > 0 else 0.0


def transfer_row(ccds: int, records: Sequence[TransferRecord]) -> TransferRow | None:
    """The table row of these records (any number of exposures); None if there are none."""
    done = [r for r in records if r.ok]
    if not done:
        return None
    by_exposure: dict[int, list[TransferRecord]] = defaultdict(list)
    for r in done:
        by_exposure[r.exposure_index].append(r)
    seconds = [r.seconds for r in done]
    sends = [r.send_seconds for r in done]
    return TransferRow(
        ccds=ccds,
        exposures=len(by_exposure),
        transfers=len(done),
        min=min(seconds),
        mean=statistics.fmean(seconds),
        max=max(seconds),
        mbit_s=statistics.median(aggregate_mbit_s(rs) for rs in by_exposure.values()),
        send_min=min(sends),
        send_mean=statistics.fmean(sends),
        send_max=max(sends),
        failed=len(records) - len(done),
        queued_max=max(r.queued_seconds for r in done),
        acked_max=max((r.end - r.readout).total_seconds() for r in done),
    )


def split_warmup(records: Sequence[TransferRecord]) -> tuple[list[TransferRecord], list[TransferRecord]]:
    """(first exposure, the rest): the first carries connection set-up and is reported apart."""
    if not records:
        return [], []
    first = min(r.exposure_index for r in records)
    return (
        [r for r in records if r.exposure_index == first],
        [r for r in records if r.exposure_index != first],
    )


#: (label, from, to) of every stage an ArrivalEvent's timestamps delimit, then the subscriber.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("read+compress", "readout", "compressed"),
    ("send+store", "compressed", "stored"),
    ("notify+register", "stored", "registered"),
    ("publish", "registered", "published"),
    ("deliver", "published", "received"),
)


@dataclass(frozen=True)
class Arrival:
    """Stage timestamps of one announced CCD (from its ArrivalEvent) plus when we received it."""

    exposure: int
    detector: int
    readout: datetime
    compressed: datetime | None
    stored: datetime | None
    registered: datetime
    published: datetime
    received: datetime

    @property
    def latency(self) -> float:
        """Readout -> announced (published), the figure the 5 s budget is about."""
        return (self.published - self.readout).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return _iso_json(self)


@dataclass(frozen=True)
class StageRow:
    stage: str
    count: int
    p50: float
    max: float


def stage_breakdown(arrivals: Sequence[Arrival]) -> list[StageRow]:
    """Seconds spent between consecutive stages, p50 and max; stages without data are left out,
    and the total (readout -> published) comes last."""
    rows = []
    for label, start, end in STAGES:
        spans = [
            (getattr(a, end) - getattr(a, start)).total_seconds()
            for a in arrivals
            if getattr(a, start) is not None and getattr(a, end) is not None
        ]
        if spans:
            rows.append(StageRow(label, len(spans), percentile(spans, 50), max(spans)))
    if arrivals:
        total = [a.latency for a in arrivals]
        rows.append(StageRow("readout->announced", len(total), percentile(total, 50), max(total)))
    return rows


@dataclass(frozen=True)
class LatencySummary:
    """Readout -> announced over a set of CCDs, against the budget."""

    expected: int
    announced: int
    p50: float | None
    p95: float | None
    max: float | None
    over_budget: int
    budget: float


def latency_summary(arrivals: Sequence[Arrival], expected: int, budget: float) -> LatencySummary:
    values = [a.latency for a in arrivals]
    return LatencySummary(
        expected=expected,
        announced=len(values),
        p50=percentile(values, 50) if values else None,
        p95=percentile(values, 95) if values else None,
        max=max(values) if values else None,
        over_budget=sum(v > budget for v in values),
        budget=budget,
    )


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_transfer_table(rows: Sequence[TransferRow]) -> str:
    """The report's columns (CCDs, min, mean, max s, Mbit/s), plus send-only times."""
    lines = [
        "| CCDs | exposures | min s | mean s | max s | Mbit/s | send min | send mean | send max |"
        " queued max | readout->acked max | failed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.ccds} | {r.exposures} | {_f(r.min)} | {_f(r.mean)} | {_f(r.max)} "
            f"| {r.mbit_s:.0f} | {_f(r.send_min)} | {_f(r.send_mean)} | {_f(r.send_max)} "
            f"| {_f(r.queued_max)} | {_f(r.acked_max)} | {r.failed} |"
        )
    return "\n".join(lines)


def format_stage_table(rows: Sequence[StageRow]) -> str:
    lines = ["| stage | CCDs | p50 s | max s |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {r.stage} | {r.count} | {_f(r.p50, 3)} | {_f(r.max, 3)} |" for r in rows]
    return "\n".join(lines)
