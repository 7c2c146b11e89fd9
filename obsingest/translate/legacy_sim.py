"""Translator for raws written by earlier versions of obsingest's DAQ simulator.

They say ``ORIGIN = 'obsingest DAQ simulator'``, ``TIMESYS = 'UTC'`` (meant: times in UTC), the
Butler's INSTRUME name and an ``EXPID``. Such objects stay in buckets and journals, so their times
are read in the scale TIMESYS names. Today's simulator writes the camera's cards.
"""

from __future__ import annotations

from typing import Any, ClassVar

import astropy.units as u
from astro_metadata_translator import cache_translation
from astro_metadata_translator.translators.helpers import tracking_from_degree_headers
from astropy.time import Time

from obsingest import camera
from obsingest.translate.rubin import SIMONYI_TELESCOPE, RubinTranslator

#: ORIGIN of the simulator's headers
SIMULATOR_ORIGIN = "obsingest DAQ simulator"


class LegacySimTranslator(RubinTranslator):
    """Headers of obsingest's simulator before it wrote camera cards (see the module doc)."""

    name = "obsingest-legacy-simulator"
    supported_instrument = None

    _trivial_map: ClassVar[dict[str, Any]] = {  # type: ignore[misc]  # the base types it per instance
        "detector_group": "RAFTBAY",
        "detector_name": "CCDSLOT",
        "exposure_time": ("EXPTIME", {"unit": u.s}),
        "exposure_time_requested": ("EXPTIME", {"unit": u.s}),
        "detector_serial": ("LSST_NUM", {"default": "unknown"}),
        "object": ("OBJECT", {"default": "UNKNOWN"}),
        "science_program": ("PROGRAM", {"default": "unknown"}),
        "boresight_rotation_angle": ("ROTPA", {"default": 0.0, "unit": u.deg}),
    }

    @classmethod
    def can_translate(cls, header: Any, filename: str | None = None) -> bool:
        return (
            header.get("ORIGIN") == SIMULATOR_ORIGIN
            and str(header.get("TIMESYS", "")).upper() == "UTC"
            and header.get("INSTRUME") in camera.INSTRUMENTS
        )

    @property
    def camera_name(self) -> str:  # type: ignore[override]
        return str(self._header["INSTRUME"])

    @cache_translation
    def to_instrument(self) -> str:
        return self.camera_name

    @cache_translation
    def to_telescope(self) -> str:
        return str(self._header.get("TELESCOP") or SIMONYI_TELESCOPE)

    @cache_translation
    def to_observation_id(self) -> str:
        if self.is_key_ok("OBSID"):
            return str(self._header["OBSID"])
        prefix = camera.instrument(self.camera_name).obsid_prefix
        day, seq = self.to_observing_day(), self.to_observation_counter()
        return f"{prefix}_O_{day}_{seq:06d}"

    @cache_translation
    def to_datetime_begin(self) -> Time:
        for key, mjd in (("DATE-BEG", "MJD-BEG"), ("DATE-OBS", "MJD-OBS")):
            value = self._from_fits_date(key, mjd_key=mjd)
            if value is not None:
                return value
        raise KeyError(f"{self._log_prefix}: neither DATE-BEG nor DATE-OBS")

    @cache_translation
    def to_tracking_radec(self) -> Any:
        # the simulator wrote no DATE card; its RASTART/DECSTART are ICRS degrees
        if self.to_observation_type() in ("bias", "flat"):
            return None
        pairs = (("RASTART", "DECSTART"), ("RA", "DEC"))
        return tracking_from_degree_headers(self, ("RADESYS",), pairs)

    @cache_translation
    def to_altaz_end(self) -> Any:
        # the simulator wrote the start of the exposure only
        return self._altaz("AZEND", "ELEND") if self.are_keys_ok(["AZEND", "ELEND"]) else None
