"""The band of a physical filter as obs_lsst's filter definitions give it (its
``filters.py``: LATISS's filter~grating combinations, the BOT's lamps and neutral-density
filters, the CCOB behind LSSTCam's white slots), including the filters of obs_lsst's own test
headers that differed before (LATISS 2019-2021, LSSTCam's BOT runs of 2019)."""

import pytest

from obsingest.translate import band

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("physical_filter", "want"),
    [
        ("r_57", "r"),
        ("SDSSr_65mm~empty", "r"),
        ("empty~SDSSg_65mm", "g"),  # LATISS's empty slot before a filter in the grating wheel
        ("empty~ronchi90lpmm", "white"),
        ("blank_bk7_wg05~empty", "white"),
        ("blank_bk7_wg05~ronchi90lpmm", "white"),
        ("KPNO_406_828nm~empty", "z"),
        ("RG610~ronchi90lpmm", "r"),
        ("quadnotch1~empty", "notch"),
        ("950nm", "y"),
        ("SDSSi~ND_OD0.5", "i~nd"),
        ("ND_OD1.0", "white~nd"),
        ("ef_43~nm750", "i"),  # the CCOB's lamp behind a white slot
        ("unknown", "unknown"),
        ("diffuser~ronchi170lpmm", "diffuser~ronchi170lpmm"),  # outside the tables: itself
        (None, None),
    ],
)
def test_band_follows_obs_lsst_filter_definitions(physical_filter, want):
    assert band(physical_filter) == want
