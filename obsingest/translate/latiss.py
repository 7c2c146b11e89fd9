"""Translator for LATISS, the spectrograph on the Rubin Auxiliary Telescope (one sensor).

LATISS has one detector, numbered 0 and named ``RXX_S00`` whatever RAFTBAY says (the camera writes
``R00``). Its headers changed a lot while it was commissioned, so ``fix_header`` carries Rubin's
rules by date: 1970 dates, IMGTYPE kept in GROUPID, RA/Dec in radians or hours, a RASTART 37 s of
RA off, the ROTPA convention flipped for a year, ``spec:`` in OBJECT, OBSGEO-Z with the wrong sign.
The filter is always FILTER~GRATING; the exposure time is EXPTIME (never the shutter's).
"""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import astropy.units as u
from astro_metadata_translator import cache_translation
from astro_metadata_translator.translators.helpers import is_non_science
from astropy.coordinates import EarthLocation
from astropy.time import Time

from obsingest.translate.rubin import RubinTranslator, is_non_science_or_lab

log = logging.getLogger(__name__)

AUXTEL_LOCATION = EarthLocation.from_geodetic(-70.747698, -30.244728, 2663.0)


def _utc(text: str) -> Time:
    return Time(text, format="isot", scale="utc")


#: LATISS is on the mountain from this day (before it: the lab)
_ON_MOUNTAIN = _utc("2020-01-01T00:00")
#: the sensor changed to ITL-3800C-068 on this day
_SENSOR_068 = _utc("2019-06-24T00:00")
_IMGTYPE_OKAY = _utc("2019-11-07T00:00")
_OBJECT_IS_ENGTEST = _utc("2020-01-27T20:00")
_RADEC_IN_RADIANS = _utc("2020-01-28T22:00")
_DATE_END_BAD = _utc("2020-02-01T00:00")
_RASTART_BAD = _utc("2020-05-01T00:00")
_RASTART_IN_HOURS = _utc("2021-02-11T18:45")
_RASTART_OKAY = _utc("2021-02-12T00:00")
_ROTPA_FLIPPED = (_utc("2020-11-19T00:00"), _utc("2021-10-29T00:00"))
_OBJECT_SPEC_PREFIX = _utc("2022-07-10T00:00")
#: RASTART/RAEND lagged by 37 s of RA (the TAI-UTC offset) between the two dates above
_RA_LAG_DEGREES = 37.0 / 3600.0 * 15.0


class LatissTranslator(RubinTranslator):
    """LATISS on the Auxiliary Telescope (INSTRUME ``LATISS``)."""

    name = "obsingest-LATISS"
    supported_instrument = "LATISS"
    default_location = AUXTEL_LOCATION

    _const_map: ClassVar[dict[str, Any]] = {  # type: ignore[misc]  # the base types it per instance
        "instrument": "LATISS",
        "telescope": "Rubin Auxiliary Telescope",
        "detector_group": "RXX",
        "detector_num": 0,
        "detector_name": "S00",
    }
    _trivial_map: ClassVar[dict[str, Any]] = {  # type: ignore[misc]  # the base types it per instance
        "observation_id": (["OBSID", "IMGNAME"], {"default": None, "checker": is_non_science}),
        "detector_serial": ["LSST_NUM", "DETSER"],
        "object": ("OBJECT", {"checker": is_non_science_or_lab, "default": "UNKNOWN"}),
        "boresight_rotation_angle": (
            ["ROTPA", "ROTANGLE"],
            {"checker": is_non_science_or_lab, "default": float("nan"), "unit": u.deg},
        ),
        "science_program": ("PROGRAM", {"default": "unknown"}),
    }

    @classmethod
    def names_camera(cls, header: Any) -> bool:
        return header.get("INSTRUME") in ("LSST_ATISS", "LATISS") or (header.get("DETNAME") == "RXX_S00")

    @classmethod
    def fix_header(cls, header: Any, instrument: str, obsid: str, filename: str | None = None) -> bool:
        return _fix_latiss(cls, header, obsid, cls._construct_log_prefix(obsid, filename))

    def on_mountain(self) -> bool:
        return self.began_after(_ON_MOUNTAIN)

    @cache_translation
    def to_exposure_time(self) -> u.Quantity:
        if self.is_key_ok("EXPTIME"):
            return self.quantity_from_card("EXPTIME", u.s)
        log.warning("%s: no EXPTIME, exposure time -1.0 s", self._log_prefix)
        return -1.0 * u.s

    @cache_translation
    def to_dark_time(self) -> u.Quantity:
        exposure = self.to_exposure_time()
        if self.is_key_ok("DARKTIME"):
            dark = self.quantity_from_card("DARKTIME", u.s)
            if dark >= exposure:
                return dark
            why = "DARKTIME is shorter than the exposure time"
        else:
            why = "no DARKTIME"
        log.warning("%s: %s, dark time = exposure time", self._log_prefix, why)
        return exposure

    @cache_translation
    def to_observation_type(self) -> str:
        for key in ("OBSTYPE", "IMGTYPE"):
            if (kind := self._card(key)) is not None:
                kind = kind.lower()
                if kind == "object" and not self.on_mountain():
                    return "labobject"
                return "science" if kind in ("skyexp", "object") else kind
        kind = "bias" if self.to_exposure_time() == 0.0 else "unknown"
        log.warning("%s: no OBSTYPE or IMGTYPE, observation type %r", self._log_prefix, kind)
        return kind

    @cache_translation
    def to_physical_filter(self) -> str:
        primary = self.primary_filter()
        if (grating := self._card("GRATING")) is not None:
            if not grating or grating.lower().startswith("empty"):
                grating = "empty"
        else:
            grating = "unknown"
        return f"{primary}~{grating}"

    @cache_translation
    def to_altaz_end(self) -> Any:
        if "AELEND" in self._header and "ELEND" not in self._header:
            return None
        return super().to_altaz_end()


def _fix_latiss(cls: type[LatissTranslator], header: Any, obsid: str, label: str) -> bool:
    """LATISS's rules by date, in place; True if a card changed (see the module doc)."""
    modified = _fix_identity(header, obsid, label)
    if "DATE-OBS" in header and header["DATE-OBS"].startswith("1970"):
        header["DATE-OBS"] = header["DATE-BEG"] = header["DATE"]
        header["MJD-OBS"] = header["MJD-BEG"] = header["MJD"]
        header["DATE-END"] = header["MJD-END"] = None
        modified = True
    date = cls(header).to_datetime_begin()
    if date > _SENSOR_068:
        header["LSST_NUM"] = "ITL-3800C-068"
        modified = True
    if date < _DATE_END_BAD and header.get("DATE-END"):
        header["DATE-END"] = header["MJD-END"] = None
        modified = True
    if date < _IMGTYPE_OKAY:
        modified = _imgtype_from_groupid(header) or modified
    if date < _OBJECT_IS_ENGTEST and header.get("IMGTYPE") == "OBJECT":
        header["IMGTYPE"] = "ENGTEST"
        modified = True
    if date < _RADEC_IN_RADIANS:
        for key in ("RA", "DEC"):
            if header.get(key) is not None:
                header[key] *= 180.0 / math.pi
                modified = True
    if header.get("SHUTTIME"):
        header["SHUTTIME"] = None  # LATISS's shutter time is not the exposure time
        modified = True
    if "OBJECT" not in header and header.get("IMGTYPE") == "OBJECT":
        header["OBJECT"] = "NOTSET"
        modified = True
    if date < _OBJECT_SPEC_PREFIX and header.get("OBJECT") is not None:
        header["OBJECT"] = header["OBJECT"].replace("spec:", "")
        modified = True
    if header.get("RADESYS") == "":
        header["RADESYS"] = "ICRS"
        modified = True
    if "TRACKSYS" in header and header["TRACKSYS"] in ("", "SIDEREAL"):
        header["TRACKSYS"] = None if header["TRACKSYS"] == "" else "RADEC"
        modified = True
    modified = _fix_pointing(header, date) or modified
    obsgeo_z = header.get("OBSGEO-Z")
    if obsgeo_z and isinstance(obsgeo_z, int | float) and obsgeo_z > 0.0:
        header["OBSGEO-Z"] = -obsgeo_z
        modified = True
    return modified


def _fix_identity(header: Any, obsid: str, label: str) -> bool:
    """OBSID, DAYOBS and SEQNUM where early headers lack them (from the observation id)."""
    modified = False
    if "OBSID" not in header:
        header["OBSID"] = obsid
        modified = True
    parts = obsid.split("_", 3) if isinstance(obsid, str) else []
    if "DAYOBS" not in header:
        day = parts[2] if len(parts) > 2 and len(parts[2]) == 8 else header.get("OBS-NITE")
        if day:
            header["DAYOBS"] = day
            modified = True
        else:
            log.debug("%s: no DAYOBS to be had", label)
    if "SEQNUM" not in header and len(parts) > 3:
        header["SEQNUM"] = int(parts[3])
        modified = True
    return modified


def _imgtype_from_groupid(header: Any) -> bool:
    """Before November 2019 the image type was written in GROUPID."""
    group = header.get("GROUPID")
    if not group or group.startswith("test"):
        return False
    imgtype = header.get("IMGTYPE")
    if imgtype:
        if imgtype == group:
            header["GROUPID"] = None
        return False
    if "_" in group:
        group = group.split("_", 1)[0]
    elif group.upper() != "FOCUS" and group.upper().startswith("FOCUS"):
        group = "FOCUS"
    else:
        header["GROUPID"] = None
    header["IMGTYPE"] = group
    return True


def _fix_pointing(header: Any, date: Time) -> bool:
    """RASTART/DECSTART: unusable before May 2020, in hours until February 2021, 37 s of RA
    behind in between; ROTPA 180 degrees off between November 2020 and October 2021."""
    modified = False
    if date < _RASTART_IN_HOURS:
        if date < _RASTART_BAD:
            for key in ("RASTART", "DECSTART", "RAEND", "DECEND"):
                header[key] = None
        else:
            for key in ("RASTART", "RAEND"):
                if header[key]:
                    header[key] *= 15.0
        modified = True
    if _RASTART_BAD < date < _RASTART_OKAY:
        modified = True
        for key in ("RASTART", "RAEND"):
            if header[key]:
                header[key] += _RA_LAG_DEGREES
    if _ROTPA_FLIPPED[0] < date < _ROTPA_FLIPPED[1]:
        header["ROTPA"] = header["ROTPA"] - 180
        modified = True
    return modified
