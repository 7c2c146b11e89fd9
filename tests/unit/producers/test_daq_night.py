"""``daq night``: manifest first, then every CCD under its final name (temp + rename), on the
cadence, with the edge's naming convention."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

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
