"""DAQ simulator: writes realistic raw CCDs (multi-extension FITS) deterministically by seed."""

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
    "physical_filter",
    "write_raw_ccd",
]
