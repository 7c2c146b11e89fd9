"""Translators for LSSTCam and LSSTComCam, the Simonyi telescope's cameras.

Beyond the shared rules (``rubin.py``): the measured shutter time is the exposure time, the
camera sees the sky only from the day it went on the telescope (before, the observing day
followed Pacific time), and Rubin's dated header fixes (``fix_header``: LSSTCam's early ROTPA,
filter, program and vignetting; ComCam's missing FILTER, LSST_NUM and ROTPA).
"""

from __future__ import annotations

import logging
from numbers import Number
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import astropy.units as u
from astro_metadata_translator import cache_translation
from astropy.time import Time, TimeDelta

from obsingest.camera import RAFT_SLOTS
from obsingest.translate.rubin import ROLLOVER, SIMONYI_TELESCOPE, RubinTranslator, is_non_science_or_lab

log = logging.getLogger(__name__)

_PACIFIC = ZoneInfo("America/Los_Angeles")

#: LSSTCam's ROTPA was 90 degrees off (the sky angle convention) from its first light until
#: 2025-04-22; on 2025-04-22 exposures before seq 251 were off by 180 degrees.
_ROTPA_MINUS_90 = (20250301, 20250422)
_ROTPA_FLIPPED_DAY, _ROTPA_FLIPPED_BEFORE_SEQ = 20250422, 251
#: days whose "ph_05" filter is the "ph_5" of the filter table
_PH05_DAYS = frozenset({"20231107", "20231108", "20241015", "20241016"})
#: days (and seq ranges) when the dome vignetted the camera fully but VIGN_MIN did not say so
_FULLY_VIGNETTED_DAYS = frozenset({20250518})
_FULLY_VIGNETTED_SEQS: dict[int | None, tuple[tuple[int, int], ...]] = {
    20250703: ((743, 745),),
    20250704: ((832, 834),),
    20250705: ((1, 736),),
    20250707: ((744, 783), (784, 823), (864, 903), (904, 943)),
    20250714: ((258, 781),),
    20250715: ((205, 1218),),
    20250819: ((4, 1052),),
}
#: (day, first seq, last seq) -> the filter really in the beam (FILTER FILTBAND FILTPOS FILTSLOT)
_WRONG_FILTER: dict[tuple[int, int, int], tuple[str, str, float, int]] = {
    (20250609, 76, 578): ("z_20", "z", 201.0, 4),
    (20260315, 49, 109): ("i_39", "i", 304.0, 1),
}
#: days on which block 417 was recorded as BLOCK-417 rather than its name, BLOCK-T417
_BLOCK_T417_DAYS = frozenset(
    {
        20250415,
        20250416,
        20250417,
        20250418,
        20250421,
        20250423,
        20250424,
        20250425,
        20250503,
        20250504,
        20250512,
        20250522,
        20250524,
        20250826,
        20250827,
        20250828,
    }
)
#: ComCam's sensors (ITL-3800C-nnn), by slot, for headers that lack LSST_NUM
_COMCAM_SERIALS = dict(
    zip(RAFT_SLOTS, ("229", "251", "215", "326", "283", "243", "319", "209", "206"), strict=True)
)
#: ComCam moved to Chile on this day: a FILTER of "r" or "" after it means no filter
_COMCAM_IN_CHILE = Time("2020-03-13T00:00", format="isot", scale="utc")


def _wrap_180(degrees: float) -> float:
    """An angle in [-180, 180)."""
    return (degrees + 180.0) % 360.0 - 180.0


class LsstCamTranslator(RubinTranslator):
    """LSSTCam on the Simonyi Survey Telescope (INSTRUME ``lsstCam``)."""

    name = "obsingest-LSSTCam"
    supported_instrument = "LSSTCam"
    camera_name = "LSSTCam"
    #: from this month on, day_obs uses the summit's 12:00 TAI rollover, before it Pacific time
    ship_month = 202405
    on_telescope = Time("2025-03-01T00:00", format="isot", scale="utc")
    sky_from_observation_type = False

    _const_map: ClassVar[dict[str, Any]] = {"instrument": "LSSTCam", "telescope": SIMONYI_TELESCOPE}  # type: ignore[misc]  # the base types it per instance
    _trivial_map: ClassVar[dict[str, Any]] = {  # type: ignore[misc]  # the base types it per instance
        "detector_group": "RAFTBAY",
        "detector_name": "CCDSLOT",
        "observation_id": "OBSID",
        "exposure_time_requested": ("EXPTIME", {"unit": u.s}),
        "detector_serial": "LSST_NUM",
        "object": ("OBJECT", {"default": "UNKNOWN"}),
        "science_program": (["PROGRAM", "RUNNUM"], {"default": "unknown"}),
        "boresight_rotation_angle": (
            ["ROTPA", "ROTANGLE"],
            {"checker": is_non_science_or_lab, "default": 0.0, "unit": u.deg},
        ),
    }

    @classmethod
    def fix_header(cls, header: Any, instrument: str, obsid: str, filename: str | None = None) -> bool:
        return _fix_lsstcam(header, cls._construct_log_prefix(obsid, filename))

    @classmethod
    def observing_date_to_offset(cls, observing_date: Time) -> TimeDelta | None:
        if int(observing_date.strftime("%Y%m")) >= cls.ship_month:
            return ROLLOVER
        pacific = observing_date.utc.to_datetime(timezone=_PACIFIC)
        return TimeDelta(-pacific.utcoffset().total_seconds(), format="sec")

    def on_mountain(self) -> bool:
        if self.controller() == "H":
            return True
        return self.began_after(self.on_telescope)

    @cache_translation
    def to_exposure_time(self) -> u.Quantity:
        if self.is_key_ok("SHUTTIME") and self._header["SHUTTIME"] > 0.0:
            return self._header["SHUTTIME"] * u.s
        return self.to_exposure_time_requested()

    @cache_translation
    def to_physical_filter(self) -> str:
        joined = super().to_physical_filter()
        while joined.endswith("~empty"):
            joined = joined.removesuffix("~empty")
        return joined

    @cache_translation
    def to_can_see_sky(self) -> bool | None:
        if not self.on_mountain():
            return False
        return super().to_can_see_sky()


class LsstComCamTranslator(LsstCamTranslator):
    """The commissioning camera, one raft (R22) on the Simonyi telescope (INSTRUME ``comCam``)."""

    name = "obsingest-LSSTComCam"
    supported_instrument = "LSSTComCam"
    camera_name = "LSSTComCam"
    ship_month = 202003
    on_telescope = Time("2024-08-24T00:00", format="isot", scale="utc")

    _const_map: ClassVar[dict[str, Any]] = {  # type: ignore[misc]  # the base types it per instance
        "instrument": "LSSTComCam",
        "telescope": SIMONYI_TELESCOPE,
    }

    @classmethod
    def names_camera(cls, header: Any) -> bool:
        instrument = str(header.get("INSTRUME", "")).lower()
        if instrument == "comcam" and header.get("TELESCOP") in (SIMONYI_TELESCOPE, "LSST"):
            return True
        return instrument == "lsst_camera" and header.get("TELCODE") == "CC"

    @classmethod
    def fix_header(cls, header: Any, instrument: str, obsid: str, filename: str | None = None) -> bool:
        return _fix_comcam(cls, header, cls._construct_log_prefix(obsid, filename))


def _fix_lsstcam(header: Any, label: str) -> bool:
    """LSSTCam's date rules, in place; True if a card changed (the rules touch disjoint days or cards)."""
    fixes: dict[str, Any] = {}
    if "FILTER" not in header and header.get("FILTER2") is not None:
        log.warning("%s: no FILTER but FILTER2=%r, FILTER2 dropped", label, header["FILTER2"])
        fixes["FILTER2"] = None
    day_text = header.get("DAYOBS")
    day = int(day_text) if day_text else None
    if day_text in _PH05_DAYS and header.get("FILTER") == "ph_05":
        fixes["FILTER"] = "ph_5"
    rotpa = header.get("ROTPA")
    if day and _ROTPA_MINUS_90[0] < day < _ROTPA_MINUS_90[1] and rotpa:
        fixes["ROTPA"] = rotpa - 90.0
    if day == _ROTPA_FLIPPED_DAY and header["SEQNUM"] < _ROTPA_FLIPPED_BEFORE_SEQ and rotpa:
        fixes["ROTPA"] = _wrap_180(rotpa - 180.0)
    vignetted = day in _FULLY_VIGNETTED_DAYS or any(
        first <= header["SEQNUM"] <= last for first, last in _FULLY_VIGNETTED_SEQS.get(day, ())
    )
    if vignetted and header["VIGN_MIN"] != "FULLY":
        fixes["VIGN_MIN"] = "FULLY"
    for (on_day, first, last), cards in _WRONG_FILTER.items():
        if day == on_day and first <= header["SEQNUM"] <= last:
            fixes.update(zip(("FILTER", "FILTBAND", "FILTPOS", "FILTSLOT"), cards, strict=True))
    if day in _BLOCK_T417_DAYS and header["PROGRAM"] == "BLOCK-417":
        fixes["PROGRAM"] = "BLOCK-T417"
    header.update(fixes)
    return bool(fixes)


def _fix_comcam(cls: type[LsstComCamTranslator], header: Any, label: str) -> bool:
    """ComCam's rules, in place; True if a card changed."""
    fixes: dict[str, Any] = {}
    physical_filter = header.get("FILTER")
    if physical_filter in (None, "r", ""):
        if physical_filter is None:
            fixes["FILTER"] = "unknown"
        elif cls(header).to_datetime_begin() > _COMCAM_IN_CHILE:
            fixes["FILTER"] = "empty"
        else:
            fixes["FILTER"] = "r_03"  # "r" is a band, the lab's filter was r_03
        log.warning("%s: FILTER %r replaced by %r", label, physical_filter, fixes["FILTER"])
    if header.get("INSTRUME") == "LSST_CAMERA":
        fixes["INSTRUME"] = "ComCam"
    if "LSST_NUM" not in header and header.get("CCDSLOT") in _COMCAM_SERIALS:
        fixes["LSST_NUM"] = "ITL-3800C-" + _COMCAM_SERIALS[header["CCDSLOT"]]
    if not isinstance(header.get("ROTPA"), Number):
        fixes["ROTPA"] = 0.0
        log.warning("%s: no numeric ROTPA, 0.0", label)
    header.update(fixes)
    return bool(fixes)
