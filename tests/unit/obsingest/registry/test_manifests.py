"""Manifests in the registry: recorded once, redelivery a no-op, a different one refused (the
first kept), a manifest that cannot describe an exposure refused with its reason."""

import math

import pytest
from sqlalchemy import func, select

from obsingest.errors import UnknownInstrument
from obsingest.registry import tables
from obsingest.registry.manifests import (
    BadManifest,
    ManifestConflict,
    manifest_digest,
    quarantine_manifest,
    record_manifest,
)
from tests.unit.obsingest.registry.conftest import DAY_OBS, E1, manifest

pytestmark = pytest.mark.unit


def _rows(registry):
    with registry.engine.connect() as conn:
        return conn.execute(select(tables.exposure_manifest)).mappings().all()


def test_a_manifest_is_recorded_once_and_a_redelivery_is_a_no_op(night):
    _, registry = night
    first = _rows(registry)
    # the same content republished later (a DAQ restart): same digest, nothing written
    again = record_manifest(
        registry, manifest(E1, list(range(9)), published=first[0]["published"].replace(year=2030))
    )
    assert again.status == "duplicate" and again.expected == 9
    assert _rows(registry) == first
    row = next(r for r in first if r["exposure"] == E1)
    assert row["detectors"] == "0,1,2,3,4,5,6,7,8" and row["expected"] == 9
    assert row["digest"] == manifest_digest(manifest(E1, list(range(9))))


def test_a_different_manifest_for_the_same_exposure_is_refused_and_the_first_kept(night):
    _, registry = night
    before = _rows(registry)
    with pytest.raises(ManifestConflict, match=r"LSSTComCam exposure 2026112200001 differs") as e:
        record_manifest(registry, manifest(E1, [0, 1, 2], flt="g_01"))
    assert "kept: 9 detectors" in str(e.value) and "refused: 3 detectors" in str(e.value)
    assert e.value.reason == "manifest-conflict" and not e.value.retriable
    assert _rows(registry) == before


def test_detector_order_does_not_make_a_manifest_different(night):
    _, registry = night
    assert record_manifest(registry, manifest(E1, list(range(8, -1, -1)))).status == "duplicate"


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"instrument": "HSC"}, UnknownInstrument, "unknown instrument 'HSC'"),
        ({"detectors": [0, 9]}, BadManifest, "LSSTComCam has no detector(s) [9] (ids 0..8)"),
        ({"detectors": [1, 1, 2]}, BadManifest, "detectors listed twice: [1]"),
        ({"detectors": []}, BadManifest, "expects no detector at all"),
        ({"day_obs": 20261123}, BadManifest, "exposure id is of day_obs 20261122"),
        ({"exposure": 5, "day_obs": 0}, BadManifest, "day_obs 0 is not a YYYYMMDD date"),
        ({"exposure_time": math.nan}, BadManifest, "exposure_time nan is not >= 0 s"),
        ({"filter": "x" * 65}, BadManifest, "filter name longer than 64"),
    ],
)
def test_a_manifest_that_cannot_describe_an_exposure_is_refused(night, change, error, words):
    _, registry = night
    with pytest.raises(error) as e:
        exposure = change.pop("exposure", E1 + 50)
        record_manifest(registry, manifest(exposure, change.pop("detectors", [0, 1]), **change))
    assert words in str(e.value)
    with registry.engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(tables.exposure_manifest)).scalar()
    assert count == 2


def test_a_refused_manifest_is_quarantined_once_however_often_it_comes(night):
    _, registry = night
    bad = manifest(E1, [0, 1, 2], flt="g_01")
    for _ in range(3):
        try:
            record_manifest(registry, bad)
        except ManifestConflict as exc:
            quarantine_manifest(registry, f"manifest/LSSTComCam/{E1}", exc, manifest_digest(bad))
    (entry,) = registry.quarantined()
    assert entry["reason"] == "manifest-conflict" and entry["occurrences"] == 3
    assert entry["object_uri"] == f"manifest/LSSTComCam/{E1}"
    assert entry["checksum"] == manifest_digest(bad)
    assert str(DAY_OBS) in entry["message"]


def test_the_manifest_of_an_offset_exposure_is_of_its_own_day(night):
    """obs_lsst raises an exposure id's year by 1000 per controller step (a CCS exposure of
    2023-09-01 is 3023090100078): its day_obs is still 20230901, not 30230901."""
    _, registry = night
    record_manifest(registry, manifest(3023090100078, [0, 1], day_obs=20230901))
    with pytest.raises(BadManifest, match="exposure id is of day_obs 20230901"):
        record_manifest(registry, manifest(3023090100079, [0, 1], day_obs=20230902))


def test_finding_the_detectors_listed_twice_is_linear_in_the_manifest():
    """A 1 MiB push holds ~750,000 detector ids: counting each one's copies took minutes of CPU
    (the GIL held) per delivery, every redelivery again. Counted by comparisons, not by time."""
    from obsingest.registry.manifests import validate_manifest

    compared = [0]

    class Id(int):
        __hash__ = int.__hash__

        def __eq__(self, other):
            compared[0] += 1
            return int.__eq__(self, other)

    n = 2000
    ids = [Id(1) for _ in range(n)] + [Id(2)]  # equal values, distinct objects: no identity shortcut
    with pytest.raises(BadManifest, match=r"detectors listed twice: \[1\]"):
        validate_manifest(manifest(E1, ids))
    assert compared[0] <= 4 * n
