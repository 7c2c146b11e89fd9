"""``obsingest demo``'s options that cannot be run say so in one line, exit 2 (as argparse's
usage errors), before anything is written."""

from __future__ import annotations

import pytest

from obsingest_cli.main import main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--detectors", "500"], "--detectors must be 1..9 for LSSTComCam"),
        (["--instrument", "HSC"], "--instrument 'HSC': one of LSSTCam, LSSTComCam, LATISS"),
        (
            ["--stack", "local", "--registry", "sqlite:///r.db"],
            "--registry applies to the embedded stack only",
        ),
    ],
)
def test_options_that_cannot_run_are_one_line_and_exit_2(tmp_path, capsys, options, says) -> None:
    """They were KeyError or ValueError tracebacks (the last after the workdir was reset)."""
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), *options]) == 2
    assert capsys.readouterr().err.splitlines() == [f"obsingest demo: {says}"]
    assert not workdir.exists()
