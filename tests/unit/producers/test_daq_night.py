"""``daq night``: manifest first, then every CCD under its final name (temp + rename), on the
cadence, with the edge's naming convention."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from obsingest.messages import ExposureManifest
from producers.daq.night import NightPlan, play_night
from producers.edge.handoff import classify

pytestmark = pytest.mark.unit


def test_a_short_night_follows_the_hand_off_convention(tmp_path: Path) -> None:
    seen = []
    started = time.monotonic()
    played = play_night(NightPlan(tmp_path, "LSSTComCam", exposures=3, detectors=2,
                                  interval=0.3, day_obs=20261122, first_seq=5),
                        on_exposure=seen.append)  # fmt: skip
    assert time.monotonic() - started >= 0.6  # the cadence held
    assert [p.exposure for p in played] == [2026112200005, 2026112200006, 2026112200007]
    assert seen == played
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 3 * 3  # manifest + 2 CCDs per exposure, no temp files left
    for path in files:
        kind = classify(path)
        assert kind is not None and kind[0] in ("ccd", "manifest"), path
    manifest = json.loads(next(tmp_path.rglob("*.manifest.json")).read_text())
    assert manifest["detectors"] == [0, 1] and manifest["instrument"] == "LSSTComCam"
    assert (played[0].files[0].parent / "LSSTComCam_2026112200005.manifest.json").exists()


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="detectors"):
        play_night(NightPlan(Path("/nonexistent"), "LSSTComCam", detectors=10))
    with pytest.raises(ValueError, match="instrument"):
        play_night(NightPlan(Path("/nonexistent"), "HSC"))


def test_each_manifest_is_handed_over_at_its_readout_before_its_ccds(tmp_path: Path) -> None:
    events: list[tuple[str, int, int]] = []  # (what, exposure, CCD files on disk then)

    def ccds_of(exposure: int) -> int:
        return len(list(tmp_path.rglob(f"*_{exposure}_*.fits")))

    def on_manifest(manifest: ExposureManifest) -> None:
        name = f"LSSTComCam_{manifest.exposure}.manifest.json"
        assert next(tmp_path.rglob(name)).exists()  # its file is written first
        events.append(("manifest", manifest.exposure, ccds_of(manifest.exposure)))
        manifests.append(manifest)

    manifests: list[ExposureManifest] = []
    played = play_night(NightPlan(tmp_path, "LSSTComCam", exposures=2, detectors=3,
                                  interval=0.2, day_obs=20261122, first_seq=1),
                        on_exposure=lambda e: events.append(("ccds", e.exposure,
                                                             ccds_of(e.exposure))),
                        on_manifest=on_manifest)  # fmt: skip
    first, second = (p.exposure for p in played)
    assert events == [("manifest", first, 0), ("ccds", first, 3),
                      ("manifest", second, 0), ("ccds", second, 3)]  # fmt: skip
    manifest = manifests[0]
    assert manifest.detectors == [0, 1, 2] and manifest.day_obs == 20261122
    assert manifest.published == played[0].readout  # published at its readout moment
    assert manifest.obs_start < manifest.published
    written = json.loads(next(tmp_path.rglob(f"*_{first}.manifest.json")).read_text())
    assert written["exposure"] == first and written["detectors"] == manifest.detectors
    # the Avro contract round-trips what the DAQ hands over
    assert ExposureManifest.decode(manifest.encode()) == manifest
