"""A small registry written through the real write path, for the presence and manifest tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsingest.dataid import DataId
from obsingest.messages import ExposureManifest
from obsingest.registry import FileRecord, Registry
from obsingest.registry.manifests import record_manifest
from obsingest.registry.presence import PresenceReader
from obsingest.settings import RegistrySettings
from tests.fixtures.sql import executed

DAY_OBS = 20261122
E1, E2, E3 = (DAY_OBS * 100_000 + n for n in (1, 2, 3))


def manifest(exposure: int, detectors: list[int], flt: str = "r_03", **kw) -> ExposureManifest:
    start = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    fields: dict[str, Any] = dict(
        instrument="LSSTComCam",
        exposure=exposure,
        day_obs=DAY_OBS,
        detectors=detectors,
        obs_start=start,
        exposure_time=15.0,
        filter=flt,
        published=start,
    )
    fields.update(kw)
    return ExposureManifest(**fields)


def register(registry: Registry, exposure: int, detector: int, late_by: float) -> None:
    """Register one CCD whose readout was ``late_by`` seconds before now."""
    registry.register(
        FileRecord(
            DataId("LSSTComCam", exposure, detector),
            f"file:///store/{exposure}/{detector}.fits.fz",
            100 + detector,
            f"crc32c:{detector:08x}",
            readout_time=datetime.now(UTC) - timedelta(seconds=late_by),
        )
    )


def newest_and_its_sql(reader: PresenceReader, n: int):
    """``reader.latest(n)`` and the statement (with parameters) that chose its exposures."""
    with executed(reader.engine) as seen:
        newest = reader.latest(n)
    [chosen] = [(s, p) for s, p in seen if "DESC" in s]
    return newest, chosen


@pytest.fixture
def night(tmp_path):
    """LSSTComCam (9 detectors): E1 complete and on time (manifest), E2 with 2 of 9 missing and
    one CCD 9 s late (manifest), E3 complete without a manifest, one CCD over budget."""
    url = f"sqlite:///{tmp_path / 'registry.sqlite3'}"
    registry = Registry.open(RegistrySettings(url=url))
    record_manifest(registry, manifest(E1, list(range(9))))
    record_manifest(registry, manifest(E2, list(range(9))))
    for det in range(9):
        register(registry, E1, det, 1.0 + det * 0.1)
    for det in range(7):
        register(registry, E2, det, 9.0 if det == 3 else 2.0)
    for det in range(9):
        register(registry, E3, det, 6.0 if det == 8 else 0.5)
    yield url, registry
    registry.close()
