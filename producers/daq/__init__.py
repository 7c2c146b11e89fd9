"""DAQ simulator: writes realistic raw CCDs (multi-extension FITS) deterministically by seed."""

from producers.daq.simulator import (
    AMP_NAMES,
    INSTRUMENTS,
    LAYOUTS,
    CcdSpec,
    detector_name,
    exposure_id,
    generate_raw_ccd,
    write_raw_ccd,
)

__all__ = [
    "AMP_NAMES",
    "INSTRUMENTS",
    "LAYOUTS",
    "CcdSpec",
    "detector_name",
    "exposure_id",
    "generate_raw_ccd",
    "write_raw_ccd",
]
