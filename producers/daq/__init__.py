"""DAQ simulator: writes raw CCDs (multi-extension FITS) as the camera writes them, under the
camera's names, deterministically by seed (README.md)."""

from producers.daq.header import load_template
from producers.daq.manifest import expected_detectors, exposure_manifest
from producers.daq.simulator import (
    AMP_NAMES,
    INSTRUMENTS,
    LAYOUTS,
    CcdSpec,
    amp_layout,
    detector_name,
    exposure_id,
    generate_raw_ccd,
    header_cards,
    physical_filter,
    write_raw_ccd,
)

__all__ = [
    "AMP_NAMES",
    "INSTRUMENTS",
    "LAYOUTS",
    "CcdSpec",
    "amp_layout",
    "detector_name",
    "expected_detectors",
    "exposure_id",
    "exposure_manifest",
    "generate_raw_ccd",
    "header_cards",
    "load_template",
    "physical_filter",
    "write_raw_ccd",
]
