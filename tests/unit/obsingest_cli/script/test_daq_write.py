"""``obsingest daq write``: the camera's file name in a directory, a real header as template."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsingest.dataid import DataId, identity_from_header
from obsingest.fits import parse_primary
from obsingest.timescales import header_instant
from obsingest_cli.main import main as cli_main

pytestmark = pytest.mark.unit

REAL = Path(__file__).parents[3] / "fixtures" / "real_headers"


def _header(path: Path):
    return parse_primary(path.read_bytes()[: 2880 * 8])


def test_a_directory_gets_the_camera_s_file_name(tmp_path: Path, capsys) -> None:
    args = ["daq", "write", str(tmp_path), "--exposure", "2026112200012", "--detector", "94"]
    args += ["--size", "small", "--obs-start", "2026-11-23T03:04:05.250+00:00"]
    assert cli_main(args) == 0
    path = tmp_path / "MC_O_20261122_000012_R22_S11.fits"
    assert f"wrote {path}" in capsys.readouterr().out
    header = _header(path)
    assert identity_from_header(header.str_value, path.name).data_id == DataId("LSSTCam", 2026112200012, 94)
    assert header.str_value("DATE-BEG") == "2026-11-23T03:04:42.250"  # TAI
    begin = header_instant(header.str_value("DATE-BEG"), header.str_value("TIMESYS"))
    assert begin.isoformat() == "2026-11-23T03:04:05.250000+00:00"


def test_a_template_gives_instrument_detector_and_exposure_time(tmp_path: Path) -> None:
    template = REAL / "latiss-AT_O_20240624_000106_R00_S00.yaml"
    args = ["daq", "write", str(tmp_path), "--exposure", "2026112200013", "--size", "small"]
    assert cli_main([*args, "--template", str(template)]) == 0
    path = tmp_path / "AT_O_20261122_000013_R00_S00.fits"
    header = _header(path)
    assert header.str_value("OBJECT") == "HD 131586"  # the template's, kept
    assert float(header.value("EXPTIME")) == 30.0  # the template's exposure time
    assert header.str_value("INSTRUME") == "LATISS"


def test_a_bad_template_or_missing_detector_is_an_error(tmp_path: Path, capsys) -> None:
    args = ["daq", "write", str(tmp_path), "--exposure", "2026112200013", "--size", "small"]
    assert cli_main(args) == 2
    assert "--detector is needed" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert cli_main([*args, "--template", str(bad)]) == 2
    assert "INSTRUME" in capsys.readouterr().err
    assert cli_main([*args, "--template", str(tmp_path / "none.yaml")]) == 2
    assert "--template" in capsys.readouterr().err
