"""What a harness run will do, decided before any process starts (pure): where to send, when each
exposure is read out (one wall-clock schedule: a camera reads every CCD out at once), and which
exposure ids (fresh per run, so a store or registry that outlives the run never answers "exists"
instead of moving the bytes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from obsingest import defaults
from obsingest.dataid import EXPOSURE_SEQ_FACTOR, make_exposure_id
from obsingest.timescales import as_utc

Scheme = Literal["file", "gs", "kafka"]


@dataclass(frozen=True)
class Destination:
    """A parsed ``--destination``: the URL for ``open_sender`` and the object-name prefix."""

    scheme: Scheme
    sender_url: str
    prefix: str = defaults.RAW_PREFIX
    #: file: the directory; gs: the bucket; kafka: the topic
    target: str = ""


def parse_destination(text: str, environ: dict[str, str] | None = None) -> Destination:
    """``file://DIR``, ``gs://BUCKET[/PREFIX]`` (the object-name prefix: ``gs://b/bench`` ->
    ``bench/LSSTCam/...``) or ``kafka://[HOST:PORT/]TOPIC`` (default broker:
    KAFKA_BOOTSTRAP_SERVERS, as ``obsingest stack env`` exports it, else the local stack's)."""
    env = os.environ if environ is None else environ
    scheme, sep, rest = text.partition("://")
    if not sep or not rest:
        raise ValueError(f"destination {text!r}: expected file://DIR, gs://BUCKET or kafka://TOPIC")
    if scheme == "file":
        directory = os.path.abspath(rest)
        return Destination("file", f"file://{directory}", defaults.RAW_PREFIX, directory)
    if scheme == "gs":
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ValueError(f"destination {text!r}: no bucket")
        prefix = prefix.strip("/")
        return Destination("gs", f"gs://{bucket}", f"{prefix}/" if prefix else defaults.RAW_PREFIX, bucket)
    if scheme == "kafka":
        host, slash, topic = rest.rpartition("/")
        if not slash:
            host, topic = "", rest
        if not topic:
            raise ValueError(f"destination {text!r}: no topic")
        bootstrap = host or env.get("KAFKA_BOOTSTRAP_SERVERS", defaults.KAFKA_BOOTSTRAP)
        return Destination("kafka", f"kafka://{bootstrap}/{topic}", defaults.RAW_PREFIX, topic)
    raise ValueError(f"destination {text!r}: unsupported scheme {scheme!r} (file, gs, kafka)")


def parse_starttime(text: str) -> datetime:
    """ISO 8601; a time without zone is UTC (the observatory's convention)."""
    return as_utc(datetime.fromisoformat(text))


def readout_times(start: datetime, interval: float, count: int) -> list[datetime]:
    """The wall-clock readout moment of each exposure: ``start + k * interval``."""
    if count < 1:
        raise ValueError("at least one exposure")
    if interval < 0:
        raise ValueError("interval must be >= 0")
    return [start + timedelta(seconds=interval * k) for k in range(count)]


def exposure_ids(start: datetime, count: int) -> list[int]:
    """``count`` consecutive Rubin-style exposure ids from the run's second of day: disjoint from
    another run's unless it started within ``count`` seconds (a run's own length at >= 1 s)."""
    utc = start.astimezone(UTC)
    day_obs = int(utc.strftime("%Y%m%d"))
    first = utc.hour * 3600 + utc.minute * 60 + utc.second + 1
    if first + count > EXPOSURE_SEQ_FACTOR:
        raise ValueError(f"{count} exposures do not fit in one observing day's sequence numbers")
    return [make_exposure_id(day_obs, first + k) for k in range(count)]


def compress_threads(ccds: int, cpus: int) -> int:
    """Threads per worker: share the cores among the CCDs compressed at once, at least one."""
    return max(1, cpus // max(1, ccds))


def edge_workers(ccds: int, cpus: int) -> int:
    """One edge worker process per core: more only share the cores among more 75 MB buffers and
    every CCD leaves late together; one per core finishes CCDs one after another, so the register
    function works on the first while the edge compresses the next (``benchmarks/README.md``)."""
    return max(1, min(ccds, cpus))
