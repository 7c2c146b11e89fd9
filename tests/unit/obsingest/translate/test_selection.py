"""Rubin's own translators, where ``lsst.obs.lsst`` is importable, translate instead of ours."""

from __future__ import annotations

import sys
import types

import pytest
from astro_metadata_translator import MetadataTranslator, ObservationInfo

from obsingest.translate import ObservationCache, rubin
from obsingest.translate.lsstcam import LsstCamTranslator
from tests.unit.obsingest.translate.real_headers import read

pytestmark = pytest.mark.unit

SCIENCE = "lsstCam-MC_O_20250415_000060_R01_S01.yaml"


@pytest.fixture
def fake_obs_lsst(monkeypatch):
    """An importable ``lsst.obs.lsst.translators`` whose import registers a translator, as
    obs_lsst's does; removed from the library's registry afterwards."""
    module = types.ModuleType(rubin.RUBIN_TRANSLATORS)

    class FakeRubinLsstCam(LsstCamTranslator):
        name = "test-fake-obs-lsst-LSSTCam"

        @classmethod
        def can_translate(cls, header, filename=None):
            return str(header.get("INSTRUME", "")).lower() == "lsstcam"

    module.FakeRubinLsstCam = FakeRubinLsstCam
    monkeypatch.setitem(sys.modules, rubin.RUBIN_TRANSLATORS, module)
    rubin.rubin_translators_installed.cache_clear()
    yield FakeRubinLsstCam
    MetadataTranslator.translators.pop(FakeRubinLsstCam.name, None)
    rubin.rubin_translators_installed.cache_clear()


def test_without_lsst_obs_lsst_ours_translate(monkeypatch):
    monkeypatch.setitem(sys.modules, rubin.RUBIN_TRANSLATORS, None)  # not importable
    rubin.rubin_translators_installed.cache_clear()
    try:
        assert not rubin.rubin_translators_installed()
        result = ObservationCache().observation(read(SCIENCE))
        assert result.translator == "LsstCamTranslator"
        assert result.info.translator_name == "obsingest-LSSTCam"
    finally:
        rubin.rubin_translators_installed.cache_clear()


def test_with_lsst_obs_lsst_importable_its_translators_are_picked(fake_obs_lsst):
    assert rubin.rubin_translators_installed()
    result = ObservationCache().observation(read(SCIENCE))
    assert result.info.translator_name == fake_obs_lsst.name
    # and the library's own choice agrees: ObservationInfo(header, translator_class=None)
    info = ObservationInfo(read(SCIENCE), translator_class=None)
    assert info.translator_name == fake_obs_lsst.name


def test_with_lsst_obs_lsst_our_translators_step_aside(fake_obs_lsst):
    assert not LsstCamTranslator.can_translate(read(SCIENCE))
