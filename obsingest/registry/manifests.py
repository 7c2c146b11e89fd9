"""ExposureManifests in the registry (completeness is asked of it): what is expected of each
exposure, recorded once. First manifest wins: a redelivery (same content, ``published`` aside) is
a no-op, a different one a ``ManifestConflict``, an impossible one a ``BadManifest`` (or
``UnknownInstrument``); the caller quarantines both.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from sqlalchemy import Connection, select

from obsingest import camera
from obsingest.dataid import exposure_day_obs, validate_day_obs, validate_instrument
from obsingest.errors import BadObjectName, PermanentError
from obsingest.messages import ExposureManifest
from obsingest.registry import tables
from obsingest.registry.registry import QuarantineEntry, Registry
from obsingest.timescales import as_utc

#: the registry's physical_filter column holds 64 characters
_MAX_FILTER = 64
_INT64_MAX = 2**63 - 1


class BadManifest(PermanentError, reason="bad-manifest"):
    """A manifest that cannot describe a real exposure: quarantined, never recorded."""


class ManifestConflict(PermanentError, reason="manifest-conflict"):
    """A different manifest for an exposure whose manifest is recorded: this one is quarantined."""


ManifestStatus = Literal["recorded", "duplicate"]


@dataclass(frozen=True)
class ManifestOutcome:
    status: ManifestStatus
    instrument: str
    exposure: int
    expected: int
    digest: str


def validate_manifest(manifest: ExposureManifest) -> tuple[int, ...]:
    """The manifest's detectors, sorted; else ``BadManifest`` (or ``UnknownInstrument``)."""
    where = f"manifest of {manifest.instrument!r} exposure {manifest.exposure}"
    validate_instrument(manifest.instrument)
    if not 0 < manifest.exposure <= _INT64_MAX:
        raise BadManifest(f"{where}: exposure id must be a positive 64-bit integer")
    try:
        validate_day_obs(manifest.day_obs, where)
    except BadObjectName as exc:
        raise BadManifest(str(exc)) from None
    if exposure_day_obs(manifest.exposure) != manifest.day_obs:
        raise BadManifest(
            f"{where}: exposure id is of day_obs {exposure_day_obs(manifest.exposure)}, "
            f"the manifest says {manifest.day_obs}"
        )
    detectors = sorted(manifest.detectors)
    if not detectors:
        raise BadManifest(f"{where}: expects no detector at all")
    if len(set(detectors)) != len(detectors):
        twice = sorted({a for a, b in pairwise(detectors) if a == b})  # neighbours: they are sorted
        raise BadManifest(f"{where}: detectors listed twice: {twice[:10]}")
    known = set(camera.INSTRUMENTS[manifest.instrument].detector_ids)
    unknown = [d for d in detectors if d not in known]
    if unknown:
        raise BadManifest(
            f"{where}: {manifest.instrument} has no detector(s) {unknown[:10]} "
            f"(ids {min(known)}..{max(known)})"
        )
    if not (math.isfinite(manifest.exposure_time) and manifest.exposure_time >= 0):
        raise BadManifest(f"{where}: exposure_time {manifest.exposure_time!r} is not >= 0 s")
    if len(manifest.filter) > _MAX_FILTER:
        raise BadManifest(f"{where}: filter name longer than {_MAX_FILTER} characters")
    return tuple(detectors)


def manifest_digest(manifest: ExposureManifest) -> str:
    """SHA-256 of what the manifest says (every field but ``published``), canonical JSON."""
    content = {
        "instrument": manifest.instrument,
        "exposure": manifest.exposure,
        "day_obs": manifest.day_obs,
        "detectors": sorted(manifest.detectors),
        "obs_start": as_utc(manifest.obs_start).isoformat(),
        "exposure_time": manifest.exposure_time,
        "filter": manifest.filter,
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def record_manifest(registry: Registry, manifest: ExposureManifest) -> ManifestOutcome:
    """Record ``manifest`` once; ``BadManifest``, ``ManifestConflict`` or ``RegistryUnavailable``."""
    detectors = validate_manifest(manifest)
    digest = manifest_digest(manifest)
    m = tables.exposure_manifest
    values: dict[str, Any] = {
        "instrument": manifest.instrument,
        "exposure": manifest.exposure,
        "day_obs": manifest.day_obs,
        "detectors": ",".join(str(d) for d in detectors),
        "expected": len(detectors),
        "obs_start": as_utc(manifest.obs_start),
        "exposure_time": manifest.exposure_time,
        "physical_filter": manifest.filter,
        "published": as_utc(manifest.published),
        "recorded_time": datetime.now(UTC),
        "digest": digest,
    }
    insert = registry._insert(m).values(values).on_conflict_do_nothing().returning(m.c.exposure)

    def tx(conn: Connection) -> ManifestStatus:
        if conn.execute(insert).first() is not None:
            return "recorded"
        kept = conn.execute(
            select(m.c.digest, m.c.expected, m.c.physical_filter).where(
                m.c.instrument == manifest.instrument, m.c.exposure == manifest.exposure
            )
        ).one()
        if kept.digest != digest:
            raise ManifestConflict(
                f"manifest of {manifest.instrument} exposure {manifest.exposure} differs from the "
                f"one recorded first (kept: {kept.expected} detectors, filter "
                f"{kept.physical_filter!r}, digest {kept.digest[:12]}; refused: {len(detectors)} "
                f"detectors, filter {manifest.filter!r}, digest {digest[:12]})"
            )
        return "duplicate"

    status = registry._tx(tx)
    return ManifestOutcome(status, manifest.instrument, manifest.exposure, len(detectors), digest)


def quarantine_manifest(
    registry: Registry, source: str, exc: PermanentError, digest: str = ""
) -> QuarantineEntry:
    """Keep a refused manifest's reason in the quarantine; ``source`` names it (its exposure
    ``manifest/<instrument>/<exposure>`` or the delivery's id)."""
    entry = QuarantineEntry(object_uri=source, reason=exc.reason, message=str(exc), checksum=digest)
    registry.quarantine(entry)
    return entry
