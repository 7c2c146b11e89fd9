"""Instruments and detectors against obs_lsst's camera description (values read from its policy
files, not recomputed from the module under test)."""

from __future__ import annotations

from collections import Counter

import pytest

from obsingest import camera

pytestmark = pytest.mark.unit


def test_lsstcam_has_205_detectors_numbered_0_to_204():
    cam = camera.instrument("LSSTCam")
    assert cam.detector_ids == tuple(range(205))
    assert Counter(d.purpose for d in cam.detectors) == {"SCIENCE": 189, "WAVEFRONT": 8, "GUIDER": 8}
    assert len({d.full_name for d in cam.detectors}) == 205


@pytest.mark.parametrize(
    ("detector", "name", "purpose", "sensor"),
    [
        (0, "R01_S00", "SCIENCE", "ITL"),
        (94, "R22_S11", "SCIENCE", "E2V"),
        (188, "R43_S22", "SCIENCE", "ITL"),
        (189, "R00_SG0", "GUIDER", "ITL_G"),
        (190, "R00_SG1", "GUIDER", "ITL_G"),
        (191, "R00_SW0", "WAVEFRONT", "ITL_WF"),
        (192, "R00_SW1", "WAVEFRONT", "ITL_WF"),
        (193, "R04_SG0", "GUIDER", "ITL_G"),
        (196, "R04_SW1", "WAVEFRONT", "ITL_WF"),
        (199, "R40_SW0", "WAVEFRONT", "ITL_WF"),
        (201, "R44_SG0", "GUIDER", "ITL_G"),
        (204, "R44_SW1", "WAVEFRONT", "ITL_WF"),
    ],
)
def test_obs_lsst_numbering(detector, name, purpose, sensor):
    det = camera.detector("LSSTCam", detector)
    assert (det.full_name, det.purpose, det.sensor.name) == (name, purpose, sensor)
    assert camera.detector_by_name("LSSTCam", name).id == detector


def test_wavefront_sensors_are_half_height_with_8_amplifiers():
    wf = camera.detector("LSSTCam", 191).sensor
    science = camera.detector("LSSTCam", 0).sensor
    assert (wf.width, wf.height, wf.amplifiers) == (4072, 2000, 8)
    assert (science.width, science.height, science.amplifiers) == (4072, 4000, 16)
    assert camera.detector("LSSTCam", 94).sensor.width == 4096  # e2v


def test_corner_sensor_positions_follow_generate_camera():
    # R00: raft at (-254, -254), yaw 180; SW0 layout (-42.25, -52.8125) + (2.5, 1.4375), turned
    sw0 = camera.detector("LSSTCam", 191)
    assert (sw0.x_mm, sw0.y_mm) == pytest.approx((-214.25, -202.625))
    sg0 = camera.detector("LSSTCam", 189)
    assert (sg0.x_mm, sg0.y_mm, sg0.yaw) == pytest.approx((-212.24, -258.74, 90.0))
    assert sg0.footprint_mm == pytest.approx((40.0, 40.72))
    # R44 has no raft yaw: SG1 at (254 + 4.74, 254 - 41.76)
    sg1 = camera.detector("LSSTCam", 202)
    assert (sg1.x_mm, sg1.y_mm) == pytest.approx((258.74, 212.24))


def test_no_two_detectors_overlap_on_the_focal_plane():
    dets = camera.instrument("LSSTCam").detectors
    for i, a in enumerate(dets):
        aw, ah = a.footprint_mm
        for b in dets[i + 1 :]:
            bw, bh = b.footprint_mm
            overlap_x = abs(a.x_mm - b.x_mm) < (aw + bw) / 2 - 0.01
            overlap_y = abs(a.y_mm - b.y_mm) < (ah + bh) / 2 - 0.01
            assert not (overlap_x and overlap_y), (a.full_name, b.full_name)


def test_butler_records_as_obs_lsst_registers_them():
    cam = camera.instrument("LSSTCam")
    assert cam.record() == {
        "name": "LSSTCam",
        "visit_max": 7050123199999,
        "visit_system": 2,
        "exposure_max": 7050123199999,
        "detector_max": 1000,
        "class_name": "lsst.obs.lsst.LsstCam",
    }
    assert cam.detector_record(94) == {
        "instrument": "LSSTCam",
        "id": 94,
        "full_name": "R22_S11",
        "name_in_raft": "S11",
        "raft": "R22",
        "purpose": "SCIENCE",
    }
    latiss = camera.instrument("LATISS").detector_record(0)
    assert (latiss["raft"], latiss["name_in_raft"], latiss["full_name"]) == (None, "RXX_S00", "RXX_S00")


def test_comcam_is_one_itl_raft():
    com = camera.instrument("LSSTComCam")
    assert [d.full_name for d in com.detectors][:3] == ["R22_S00", "R22_S01", "R22_S02"]
    assert {d.sensor.name for d in com.detectors} == {"ITL"}
    assert com.filters["r"] == "r_03"


def test_unknown_names_say_what_exists():
    with pytest.raises(KeyError, match=r"ids 0\.\.204"):
        camera.detector("LSSTCam", 205)
    with pytest.raises(KeyError, match="known"):
        camera.instrument("HSC")
