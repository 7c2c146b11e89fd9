"""The focal-plane plot: every detector in its obs_lsst place, raft outlines and names."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from beam_jobs import report
from obsingest.messages import ExposureSummary
from tests.unit.beam_jobs.helpers import T0, arrival, exposure_id

pytestmark = pytest.mark.unit


def test_lsstcam_positions_cover_all_205_detectors_in_their_rafts():
    pos = report.focal_plane_positions("LSSTCam", range(205))
    assert len(pos) == 205
    x, y, w, h = pos[94]  # R22_S11: the centre of the focal plane, an e2v sensor
    assert (x, y, w, h) == pytest.approx((0.0, 0.0, 40.96, 40.04))
    x, y, w, h = pos[191]  # R00_SW0: a half-height wavefront sensor in the R00 corner
    assert (w, h) == pytest.approx((40.72, 20.0)) and x < -200 and y < -200
    assert report.focal_plane_positions("LSSTCam", [999]) == {}


def test_plot_shows_every_detector_with_rafts(tmp_path, monkeypatch):
    seen = {}
    original = report._raft_outlines

    def spy(ax, instrument, pos):
        seen["detectors"] = set(pos)
        original(ax, instrument, pos)
        seen["rafts"] = {t.get_text() for t in ax.texts if t.get_text().startswith("R")}

    monkeypatch.setattr(report, "_raft_outlines", spy)
    arrivals = [arrival(1, d, 0.0, 1.0 + d / 100, instrument="LSSTCam") for d in range(205) if d != 7]
    summary = ExposureSummary(
        "LSSTCam",
        exposure_id(1),
        204,
        5.0,
        "INCOMPLETE",
        T0,
        expected=205,
        completeness=204 / 205,
        missing_detectors=[7],
    )
    path = report.plot_focal_plane(summary, arrivals, tmp_path / "fp.png")
    assert path.stat().st_size > 20_000
    assert seen["detectors"] == set(range(205))
    assert {"R00", "R04", "R40", "R44", "R22", "R01", "R43"} <= seen["rafts"]
    assert len(seen["rafts"]) == 25
    plt.close("all")


def test_every_latency_axis_says_its_time_scale(tmp_path, monkeypatch):
    """Readout and publication are UTC instants: the plots say latencies are UTC seconds."""
    labels = []
    original = report._save

    def spy(fig, path):
        for ax in fig.axes:
            labels.extend([ax.get_xlabel(), ax.get_ylabel()])
        return original(fig, path)

    monkeypatch.setattr(report, "_save", spy)
    arrivals = [arrival(1, d, 0.0, 1.0 + d / 10) for d in range(3)]
    summary = ExposureSummary(
        "LSSTComCam",
        exposure_id(1),
        3,
        5.0,
        "OK",
        T0,
        expected=3,
        completeness=1.0,
        latency_p95=1.2,
        latency_max=1.2,
    )
    report.plot_latency(arrivals, 5.0, tmp_path / "latency.png")
    report.plot_latency_histogram(arrivals, 5.0, tmp_path / "histogram.png")
    report.plot_night([summary], tmp_path / "night.png")
    latency_labels = [label for label in labels if label.startswith("latency")]
    assert len(latency_labels) == 3
    assert all(label.endswith("[s, UTC]") for label in latency_labels)
    plt.close("all")
