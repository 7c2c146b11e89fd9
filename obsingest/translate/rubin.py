"""What every Rubin camera header (LSSTCam, LSSTComCam, LATISS) shares, as a translator base class.

Rubin's rules, as its raw ingest applies them: times are TAI whatever TIMESYS says for the start
(DATE-END alone follows TIMESYS), the exposure id is ``DAYOBS * 100000 + SEQNUM`` with the old
controller offsets, the observing day rolls over at 12:00 TAI, and a present but empty card takes
the property's default with a warning instead of refusing the CCD. Where ``lsst.obs.lsst``'s
translators import, they register with astro_metadata_translator and ours step aside.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import logging
import re
from contextlib import suppress
from functools import cache
from typing import Any, ClassVar, cast

import astropy.units as u
from astro_metadata_translator import FitsTranslator, cache_translation
from astro_metadata_translator.translators.helpers import (
    altaz_from_degree_headers,
    is_non_science,
    tracking_from_degree_headers,
)
from astropy.coordinates import ICRS, EarthLocation, SkyCoord
from astropy.time import Time, TimeDelta

from obsingest import camera
from obsingest.dataid import CONTROLLERS, EXPOSURE_SEQ_FACTOR, packed_exposure_id

log = logging.getLogger(__name__)

#: the module that registers Rubin's translators when imported
RUBIN_TRANSLATORS = "lsst.obs.lsst.translators"

#: Simonyi Survey Telescope, the default site when a header carries no OBSGEO cards
SIMONYI_LOCATION = EarthLocation.from_geodetic(-70.749417, -30.244639, 2663.0)
SIMONYI_TELESCOPE = "Simonyi Survey Telescope"
#: the controllers whose data are simulated
SIMULATED_CONTROLLERS = "HPQS"
#: the Rubin day starts at 12:00 TAI (SITCOMTN-032)
ROLLOVER = TimeDelta(12 * 3600, scale="tai", format="sec")
#: visit ids from a GROUPID that is an ISO time: seconds since this epoch, milliseconds, counter
_VISIT_EPOCH = dt.datetime(2015, 1, 1)
_GROUP_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})(?:[+#](\d+))?$")


@cache
def rubin_translators_installed() -> bool:
    """True when Rubin's own translators import (and so are registered); looked up once, the
    import is not cheap."""
    try:
        importlib.import_module(RUBIN_TRANSLATORS)
    except ImportError:
        return False
    except Exception as exc:  # installed but broken: ours are better than none
        log.warning("%s is installed but does not import (%s); using obsingest's", RUBIN_TRANSLATORS, exc)
        return False
    return True


def exposure_id(day_obs: Any, seq_num: Any, controller: str | None = None) -> int:
    """Rubin's exposure id of (DAYOBS, SEQNUM, CONTRLLR) (``dataid.make_exposure_id``), each card
    checked: ValueError naming the one that is not a day, a sequence number or a controller."""
    day = str(day_obs).split("T", 1)[0].replace("-", "")
    if len(day) != 8 or not day.isdigit():
        raise ValueError(f"DAYOBS={day_obs!r} is not a YYYYMMDD day")
    seq = int(seq_num)
    if not 0 <= seq < EXPOSURE_SEQ_FACTOR:
        raise ValueError(f"SEQNUM={seq_num!r} is outside 0..{EXPOSURE_SEQ_FACTOR - 1}")
    if controller is not None and (not controller or controller not in CONTROLLERS):
        raise ValueError(f"CONTRLLR={controller!r} is none of {CONTROLLERS}")
    return packed_exposure_id(int(day), seq, controller)


def is_non_science_or_lab(translator: RubinTranslator) -> None:
    """Checker for cards a science observation on the mountain must have: KeyError if so."""
    with suppress(KeyError):
        is_non_science(translator)
        return
    if translator.on_mountain():
        raise KeyError(f"{translator._log_prefix}: a science observation on the mountain lacks it")


class RubinTranslator(FitsTranslator):
    """Cards and rules common to Rubin's cameras; subclasses say which camera and which dates."""

    #: the ``obsingest.camera`` instrument whose detector table numbers RAFTBAY_CCDSLOT
    camera_name: str | None = None
    default_location = SIMONYI_LOCATION
    _non_sky_observation_types: tuple[str, ...] = ("bias", "dark", "flat")
    #: may can_see_sky fall back on the observation type when no card says
    sky_from_observation_type = True

    _const_map: ClassVar[dict[str, Any]] = {}  # type: ignore[misc]  # the base types it per instance
    _trivial_map: ClassVar[dict[str, Any]] = {}  # type: ignore[misc]  # the base types it per instance

    @classmethod
    def can_translate(cls, header: Any, filename: str | None = None) -> bool:
        """Never where Rubin's own translators are installed."""
        return not rubin_translators_installed() and cls.names_camera(header)

    @classmethod
    def names_camera(cls, header: Any) -> bool:
        return str(header.get("INSTRUME", "")).lower() == str(cls.supported_instrument).lower()

    # --- where and when ---------
    def on_mountain(self) -> bool:
        """Whether the camera was on its telescope (a test stand writes TSTAND)."""
        return "TSTAND" not in self._header

    def began_after(self, when: Time) -> bool:
        """Whether the observation began after ``when`` (a class constant), remembered per
        translator: comparing times of two scales converts one, and it is asked repeatedly."""
        memo: dict[int, bool] = self.__dict__.setdefault("_began_after", {})
        found = memo.get(id(when))
        if found is None:
            found = memo[id(when)] = bool(self.to_datetime_begin() > when)
        return found

    def on_sky(self) -> bool:
        """Whether this observation looked at the sky from the mountain."""
        if self.is_key_ok("TRACKSYS") and self._header["TRACKSYS"].lower() == "local":
            return False
        if self.to_observation_type() in self._non_sky_observation_types:
            return False
        return self.on_mountain()

    def _card(self, key: str) -> Any:
        """The value of card ``key``, marked used, or None when it is absent or undefined."""
        if not self.is_key_ok(key):
            return None
        self._used_these_cards(key)
        return self._header[key]

    def controller(self) -> str | None:
        """CONTRLLR: O (operations), C (calibration), H P Q S (simulated), or None."""
        return cast(str | None, self._card("CONTRLLR"))

    @classmethod
    def observing_date_to_offset(cls, observing_date: Time) -> TimeDelta | None:
        return ROLLOVER

    @cache_translation
    def to_location(self) -> EarthLocation | None:
        if not self.on_mountain():
            return None
        try:
            return super().to_location()
        except (KeyError, TypeError):
            return self.default_location

    @cache_translation
    def to_datetime_begin(self) -> Time:
        # The camera's clock is TAI; the MJD cards are preferred, as Rubin's ingest does.
        for key in ("MJD-BEG", "DATE-BEG", "MJD-OBS", "DATE-OBS"):
            if (value := self._card(key)) is not None:
                return Time(value, scale="tai", format="mjd" if key.startswith("MJD") else "fits")
        raise KeyError(f"{self._log_prefix}: none of MJD-BEG, DATE-BEG, MJD-OBS, DATE-OBS")

    @cache_translation
    def to_datetime_end(self) -> Time:
        if self.is_key_ok("DATE-END"):
            return super().to_datetime_end()
        exposure = self.to_exposure_time()
        if exposure.value < 0.0:
            return self.to_datetime_begin()
        return self.to_datetime_begin() + exposure

    # --- identity ---------
    @cache_translation
    def to_exposure_id(self) -> int | None:  # type: ignore[override]  # None: a calibration
        if "CALIB_ID" in self._header:
            self._used_these_cards("CALIB_ID")
            return None
        day, seq = self._header["DAYOBS"], self._header["SEQNUM"]
        self._used_these_cards("DAYOBS", "SEQNUM")
        return exposure_id(day, seq, self.controller())

    @cache_translation
    def to_detector_num(self) -> int | None:  # type: ignore[override]  # None: unknown name
        full = f"{self.to_detector_group()}_{self.to_detector_name()}"
        try:
            return camera.detector_by_name(self.camera_name or "", full).id
        except KeyError:
            log.warning("%s: no detector named %s", self._log_prefix, full)
            return None

    @cache_translation
    def to_detector_exposure_id(self) -> int | None:
        # Rubin's packed (exposure, detector) id needs obs_lsst's dimension packer; the registry
        # keys on (exposure, detector) and does not use it.
        return None

    @cache_translation
    def to_observing_day(self) -> int | None:
        day = self._card("DAYOBS")
        return int(day) if day is not None else super().to_observing_day()

    @cache_translation
    def to_observation_counter(self) -> int:
        if (seq := self._card("SEQNUM")) is not None:
            return int(seq)
        log.warning("%s: no SEQNUM, observation counter 0", self._log_prefix)
        return 0

    @cache_translation
    def to_exposure_group(self) -> str | None:
        if (group := self._card("GROUPID")) is not None:
            if isinstance(group, dt.datetime):
                group = group.isoformat(timespec="milliseconds")
            return cast(str, group)
        return super().to_exposure_group()

    @cache_translation
    def to_visit_id(self) -> int:
        group = self.to_exposure_group()
        if group is not None and group.isdigit():
            return int(group)
        match = _GROUP_TIME.match(group or "")
        if match:
            when = dt.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")
            seconds = int((when - _VISIT_EPOCH).total_seconds())
            return int(f"{seconds}{match.group(2)}{int(match.group(3) or 0):04d}")
        digest = int(hashlib.blake2b((group or "").encode("us-ascii")).hexdigest()[:14], 16)
        return int(f"{digest}{len(group or ''):02d}")

    @cache_translation
    def to_group_counter_start(self) -> int | None:  # type: ignore[override]  # as exposure_id
        counter = self.to_observation_counter()
        if self.is_key_ok("CURINDEX"):
            self._used_these_cards("CURINDEX")
            return cast(int, counter - self._header["CURINDEX"] + 1)
        return counter if counter != 0 else self.to_exposure_id()

    @cache_translation
    def to_group_counter_end(self) -> int | None:  # type: ignore[override]  # as exposure_id
        counter = self.to_observation_counter()
        if self.is_key_ok("CURINDEX") and self.is_key_ok("MAXINDEX"):
            self._used_these_cards("CURINDEX", "MAXINDEX")
            return cast(int, counter + self._header["MAXINDEX"] - self._header["CURINDEX"])
        return counter if counter != 0 else self.to_exposure_id()

    # --- what kind of observation ---------
    @cache_translation
    def to_observation_type(self) -> str:
        kind = self._header["IMGTYPE"].lower()
        self._used_these_cards("IMGTYPE")
        return "science" if kind in ("skyexp", "object") else kind

    @cache_translation
    def to_observation_reason(self) -> str:
        for key in ("REASON", "TESTTYPE"):
            if (reason := self._card(key)) is not None:
                return cast(str, reason.lower())
        return super().to_observation_reason()

    @cache_translation
    def to_dark_time(self) -> u.Quantity:
        if (dark := self._card("DARKTIME")) is not None:
            return dark * u.s
        log.warning("%s: no DARKTIME, dark time = exposure time", self._log_prefix)
        return self.to_exposure_time()

    @cache_translation
    def to_physical_filter(self) -> str:
        joined = self._join_keyword_values(["FILTER", "FILTER1", "FILTER2"], delim="~")
        return (joined or "unknown").replace("NONE", "none")

    def primary_filter(self) -> str:
        """FILTER, with an empty slot (``empty``, ``empty_2``) called ``empty``."""
        if (value := self._card("FILTER")) is not None:
            return "empty" if re.match(r"empty_?\d*$", value.lower()) else value
        if self.to_observation_type() not in ("bias", "dark"):
            log.warning("%s: no FILTER, physical filter unknown", self._log_prefix)
        return "unknown"

    @cache_translation
    def to_has_simulated_content(self) -> bool:
        for key, value in self._header.items():
            if "SIMULATE" in key and value:
                self._used_these_cards(key)
                return True
        controller = self.controller()
        return bool(controller and controller in SIMULATED_CONTROLLERS)

    @cache_translation
    def to_can_see_sky(self) -> bool | None:
        if self.is_key_ok("SHUTTIME") and self._header["SHUTTIME"] == 0.0:
            self._used_these_cards("SHUTTIME")
            return False
        if self.is_key_ok("VIGN_MIN"):
            self._used_these_cards("VIGN_MIN")
            return {"FULLY": False, "UNKNOWN": None}.get(self._header["VIGN_MIN"], True)
        if self.sky_from_observation_type or self.controller() == "H":
            return super().to_can_see_sky()
        return None

    # --- pointing ---------
    @cache_translation
    def to_tracking_radec(self) -> SkyCoord | None:
        if self.to_observation_type() in ("bias", "flat"):
            return None
        if self.is_key_ok("TRACKSYS") and self._header["TRACKSYS"] != "RADEC":
            return None
        try:
            if self._header.get("DATE-OBS") == self._header["DATE"]:
                altaz = self.to_altaz_begin()
                return SkyCoord(altaz.transform_to(ICRS()), obstime=altaz.obstime, location=altaz.location)
            pairs = (("RASTART", "DECSTART"), ("RA", "DEC"))
            return tracking_from_degree_headers(self, ("RADESYS",), pairs)
        except Exception:
            if self.on_sky():
                raise
            return None

    @cache_translation
    def to_altaz_begin(self) -> Any:
        return self._altaz("AZSTART", "ELSTART")

    @cache_translation
    def to_altaz_end(self) -> Any:
        return self._altaz("AZEND", "ELEND")

    def _altaz(self, az_key: str, el_key: str) -> Any:
        if not self.on_mountain():
            return None
        if self.controller() == "H" and not self.are_keys_ok([el_key, az_key]):
            return None
        altaz = altaz_from_degree_headers(
            self, ((el_key, az_key),), self.to_datetime_begin(), is_zd=None, max_alt=95.55, min_alt=-5.55
        )
        self._used_these_cards(el_key, az_key)
        return altaz

    @cache_translation
    def to_boresight_rotation_coord(self) -> str:
        if not self.on_sky():
            return "unknown"
        self._used_these_cards("ROTCOORD")
        return self._header.get("ROTCOORD") or "unknown"

    @cache_translation
    def to_boresight_airmass(self) -> float | None:
        if not self.on_sky():
            return None
        if (airmass := self._card("AMSTART")) is not None:
            return cast(float, airmass)
        altaz = self.to_altaz_begin()
        if altaz is not None:
            return cast(float, altaz.secz.to_value())
        log.warning("%s: no airmass for a science observation, 1.0", self._log_prefix)
        return 1.0

    @cache_translation
    def to_focus_z(self) -> u.Quantity:
        if self.is_key_ok("FOCUSZ"):
            return float(self._header["FOCUSZ"]) * u.mm
        return super().to_focus_z()

    # --- weather ---------
    @cache_translation
    def to_relative_humidity(self) -> float | None:  # type: ignore[override]  # None: no card
        return self._header["HUMIDITY"] if self.is_key_ok("HUMIDITY") else None

    @cache_translation
    def to_pressure(self) -> u.Quantity | None:
        if not self.is_key_ok("PRESSURE"):
            return None
        value = self._header["PRESSURE"]
        return value * (u.Pa if value > 10_000 else u.hPa)

    @cache_translation
    def to_temperature(self) -> u.Quantity | None:
        return self._header["AIRTEMP"] * u.deg_C if self.is_key_ok("AIRTEMP") else None
