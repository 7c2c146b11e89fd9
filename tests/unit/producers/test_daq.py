"""DAQ simulator: layout, headers, determinism by seed, plausible pixel statistics."""

from __future__ import annotations

import io
import warnings
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from astropy.io import fits

from obsingest import camera
from producers.daq.simulator import (
    AMP_NAMES,
    CcdSpec,
    amp_layout,
    detector_name,
    exposure_id,
    generate_raw_ccd,
    write_raw_ccd,
)

pytestmark = pytest.mark.unit

START = datetime(2026, 11, 23, 3, 4, 5, 250000, tzinfo=UTC)
SPEC = CcdSpec(
    instrument="LSSTCam",
    exposure=2026112200012,
    detector=94,
    day_obs=20261122,
    obs_start=START,
    exposure_time=30.0,
    filter="r",
    size="small",
    seed=7,
)


def _open(data: bytes) -> fits.HDUList:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hdus = fits.open(io.BytesIO(data))
        hdus.verify("exception")
    return hdus


def test_same_spec_gives_same_bytes() -> None:
    assert generate_raw_ccd(SPEC) == generate_raw_ccd(SPEC)


@pytest.mark.parametrize(
    "change", [{"seed": 8}, {"detector": 95}, {"exposure": 2026112200013}, {"instrument": "LSSTComCam"}]
)
def test_any_data_id_or_seed_change_gives_other_pixels(change: dict) -> None:
    if change.get("instrument") == "LSSTComCam":
        change = {**change, "detector": 4}
    a = _open(generate_raw_ccd(SPEC))
    b = _open(generate_raw_ccd(replace(SPEC, **change)))
    assert not np.array_equal(a[1].data, b[1].data)


def test_small_layout_and_headers() -> None:
    hdus = _open(generate_raw_ccd(SPEC))
    assert len(hdus) == 1 + len(AMP_NAMES) == 17
    primary = hdus[0].header
    assert hdus[0].data is None
    assert primary["INSTRUME"] == "lsstCam"  # the camera's spelling, not the Butler's
    assert "EXPID" not in primary and "DETECTOR" not in primary and "DETNAME" not in primary
    assert primary["DAYOBS"] == "20261122"
    assert primary["SEQNUM"] == 12
    assert (primary["CAMCODE"], primary["CONTRLLR"]) == ("MC", "O")
    # the camera's clock is TAI: 37 s ahead of the UTC start the spec gives
    assert primary["TIMESYS"] == "TAI"
    assert primary["DATE-OBS"] == primary["DATE-BEG"] == "2026-11-23T03:04:42.250"
    assert primary["EXPTIME"] == 30.0
    assert primary["FILTER"] == "r_57"
    assert primary["FILTBAND"] == "r"
    assert primary["OBSID"] == "MC_O_20261122_000012"
    assert primary["FILENAME"] == "MC_O_20261122_000012_R22_S11.fits" == SPEC.file_name
    assert (primary["RAFTBAY"], primary["CCDSLOT"]) == ("R22", "S11")
    assert primary["IMGTYPE"] == "OBJECT"
    assert primary["GROUPID"] == "2026-11-23T03:04:38.820"  # the group opened 3.43 s before
    assert primary["DARKTIME"] == 30.9318
    assert primary["CCD_MANU"] == "E2V"  # R22 is an e2v raft in obs_lsst
    assert -90 <= primary["DECSTART"] <= 90 and 0 <= primary["RASTART"] < 360
    lay = SPEC.layout
    assert lay == amp_layout(camera.SENSOR_TYPES["E2V"], "small")
    assert [h.header["EXTNAME"] for h in hdus[1:]] == list(AMP_NAMES)
    p = lay.prescan
    for hdu in hdus[1:]:
        assert hdu.header["BITPIX"] == 32
        assert hdu.data.shape == (lay.rows, lay.cols)
        assert hdu.data.dtype.kind == "i"
        assert hdu.header["DATASEC"] == f"[{p + 1}:{p + lay.data_cols},1:{lay.data_rows}]"
        assert hdu.header["BIASSEC"] == f"[{p + 1 + lay.data_cols}:{lay.cols},1:{lay.data_rows}]"


@pytest.mark.parametrize(
    ("detector", "amps", "name", "purpose"),
    [(191, 8, "R00_SW0", "WAVEFRONT"), (189, 16, "R00_SG0", "GUIDER"), (0, 16, "R01_S00", None)],
)
def test_corner_sensors_have_their_geometry(detector, amps, name, purpose) -> None:
    spec = replace(SPEC, detector=detector, size="full")
    data = generate_raw_ccd(spec)
    hdus = _open(data)
    assert len(hdus) == 1 + amps
    assert f"{hdus[0].header['RAFTBAY']}_{hdus[0].header['CCDSLOT']}" == name
    assert camera.detector("LSSTCam", detector).purpose == (purpose or "SCIENCE")
    assert hdus[0].header["CCD_TYPE"] == ("4400" if purpose == "WAVEFRONT" else "3800C")
    assert hdus[0].header["DETSIZE"] == ("[1:4072,1:2000]" if amps == 8 else "[1:4072,1:4000]")
    # every amplifier is an ITL one (576 x 2048 raw, imaging 509 x 2000 after 3 prescan columns)
    assert all(h.data.shape == (2048, 576) for h in hdus[1:])
    assert hdus[1].header["DATASEC"] == "[4:512,1:2000]"
    # a wavefront raw is half the size of a science one
    amp_bytes = 2880 + -(-2048 * 576 * 4 // 2880) * 2880  # header block + padded pixels
    assert len(data) == 4 * 2880 + amps * amp_bytes
    assert len(data) == (75_582_720 if amps == 16 else 37_797_120)


def test_e2v_amplifiers_have_the_e2v_imaging_section() -> None:
    hdus = _open(generate_raw_ccd(replace(SPEC, size="full")))
    assert hdus[1].header["DATASEC"] == "[11:522,1:2002]"
    assert hdus[1].header["BIASSEC"] == "[523:576,1:2002]"


def test_bias_is_fixed_per_amplifier_not_per_exposure() -> None:
    a = _open(generate_raw_ccd(SPEC))
    b = _open(generate_raw_ccd(replace(SPEC, exposure=2026112200099)))
    levels = [h.header["BIASLVL"] for h in a[1:]]
    assert levels == [h.header["BIASLVL"] for h in b[1:]]
    assert len(set(levels)) == len(levels)
    assert all(1_000 <= v <= 20_000 for v in levels)


def test_full_size_is_the_reference_ccd() -> None:
    spec = replace(SPEC, size="full")
    data = generate_raw_ccd(spec)
    assert len(data) == 75_582_720
    hdus = _open(data)
    assert sum(h.data.nbytes for h in hdus[1:]) == 16 * 2048 * 576 * 4
    amp = hdus[1].data.astype(np.float64)
    bias, read_noise = hdus[1].header["BIASLVL"], hdus[1].header["RDNOISE"]
    lay = spec.layout  # detector 94 is an e2v sensor: imaging [10:522, 0:2002]
    x0, x1 = lay.prescan, lay.prescan + lay.data_cols
    overscan = amp[: lay.data_rows, x1:]
    assert abs(np.median(overscan) - bias) < 1
    assert abs(overscan.std() - read_noise) < 0.2
    sky = 3.5 * 30.0
    imaging = amp[: lay.data_rows, x0:x1]
    assert abs(np.median(imaging) - bias - sky) < 2
    assert abs(np.std(imaging[np.abs(imaging - bias - sky) < 100]) - np.sqrt(sky + 25)) < 0.5
    # stars and cosmic rays exist somewhere on the CCD
    assert max(int(h.data.max()) - h.header["BIASLVL"] for h in hdus[1:]) > 1_000


def test_bias_frame_has_no_sky() -> None:
    hdus = _open(generate_raw_ccd(replace(SPEC, exposure_time=0.0, size="full")))
    amp = hdus[3].data[:2000, 3:512]
    assert abs(np.median(amp) - hdus[3].header["BIASLVL"]) < 1
    assert hdus[0].header["IMGTYPE"] == "BIAS"


def test_write_is_atomic_and_equals_generate(tmp_path) -> None:
    path = write_raw_ccd(SPEC, tmp_path / "sub" / SPEC.file_name)
    assert path.read_bytes() == generate_raw_ccd(SPEC)
    assert sorted(p.name for p in path.parent.iterdir()) == ["MC_O_20261122_000012_R22_S11.fits"]


def test_ids_and_names() -> None:
    assert exposure_id(20261122, 12) == 2026112200012
    assert exposure_id(20230901, 12, "C") == 3023090100012  # the CCS's own counter then
    assert exposure_id(20261122, 12, "C") == 2026112200012  # shared with the OCS's since
    assert detector_name("LSSTCam", 0) == "R01_S00"
    assert detector_name("LSSTCam", 94) == "R22_S11"
    assert detector_name("LSSTCam", 188) == "R43_S22"
    assert detector_name("LSSTComCam", 8) == "R22_S22"
    assert detector_name("LSSTCam", 189) == "R00_SG0"
    assert detector_name("LSSTCam", 204) == "R44_SW1"
    with pytest.raises(ValueError):
        detector_name("LSSTCam", 205)
    with pytest.raises(ValueError):
        exposure_id(20261122, 100_000)


@pytest.mark.parametrize(
    "change",
    [
        {"instrument": "HSC"},
        {"detector": 9, "instrument": "LSSTComCam"},
        {"obs_start": datetime(2026, 11, 23, 3, 4, 5)},  # naive: no timezone
        {"exposure": 2026112100012},  # not on day_obs
        {"controller": "H"},  # an H exposure id carries the offset; this one does not
        {"size": "huge"},
        {"exposure_time": -1.0},
    ],
)
def test_invalid_specs_are_rejected(change: dict) -> None:
    with pytest.raises(ValueError):
        replace(SPEC, **change)


def test_faint_sky_is_poisson() -> None:
    """Below 50 e- the sky is drawn exactly (CDF inversion): mean and variance both ~ the mean."""
    spec = replace(SPEC, filter="u", exposure_time=10.0, size="full")
    hdus = _open(generate_raw_ccd(spec))
    lay = spec.layout
    imaging = hdus[2].data[: lay.data_rows, lay.prescan : lay.prescan + lay.data_cols]
    amp = imaging.astype(np.float64) - hdus[2].header["BIASLVL"]
    rn = hdus[2].header["RDNOISE"]
    core = amp[np.abs(amp) < 60]
    assert abs(core.mean() - 10.0) < 0.2
    assert abs(core.var() - (10.0 + rn**2)) < 1.0


def test_manifest_lists_the_whole_focal_plane_by_default() -> None:
    from producers.daq.manifest import expected_detectors, exposure_manifest

    manifest = exposure_manifest("LSSTCam", 2026112200012, 20261122, START, 30.0, "r")
    assert manifest.detectors == list(range(205))
    assert manifest.filter == "r_57"
    assert expected_detectors("LSSTComCam") == list(range(9))
    assert expected_detectors("LSSTCam", 9) == list(range(9))
    with pytest.raises(ValueError, match=r"1\.\.205"):
        expected_detectors("LSSTCam", 206)
    with pytest.raises(KeyError, match="no detector 300"):
        exposure_manifest("LSSTCam", 2026112200012, 20261122, START, 30.0, "r", [0, 300])
