"""Which formatter an export for ``butler import`` names, per target and instrument (issue 20:
an export naming obsingest's own class cannot be imported where obsingest is not installed)."""

from __future__ import annotations

import pytest

from obsingest.registry.butler_export import TARGETS, formatter_for

pytestmark = pytest.mark.unit


def test_rubin_names_obs_lsst_raw_formatters_per_instrument_and_never_obsingest():
    assert formatter_for("LSSTCam", "rubin", {}) == "lsst.obs.lsst.rawFormatter.LsstCamRawFormatter"
    assert formatter_for("LSSTComCam", "rubin", {}) == "lsst.obs.lsst.rawFormatter.LsstComCamRawFormatter"
    assert formatter_for("LATISS", "rubin", {}) == "lsst.obs.lsst.rawFormatter.LatissRawFormatter"
    assert TARGETS["rubin"][1] == "Exposure"


def test_daf_butler_names_a_class_daf_butler_ships_and_overrides_win():
    name = formatter_for("LSSTCam", "daf_butler", {})
    module = name.rpartition(".")[0]
    assert module.startswith("lsst.daf.butler") and not name.startswith("obsingest")
    assert formatter_for("LATISS", "rubin", {"LATISS": "my.Formatter"}) == "my.Formatter"
    with pytest.raises(ValueError, match="unknown export target"):
        formatter_for("LSSTCam", "nowhere", {})
