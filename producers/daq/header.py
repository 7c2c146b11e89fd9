"""The primary header of a simulated raw: the cards, names and time scale the camera writes,
from the real Rubin headers in ``tests/fixtures/real_headers``, so everything downstream runs on
what the camera sends (cards, TAI times and template rules: ``producers/daq/README.md``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from obsingest import camera, dataid
from obsingest.dataid import HEADER_INSTRUMENTS, DataId
from obsingest.fits import CARD, card_memo, make_card
from obsingest.timescales import CAMERA_SCALE, camera_time, header_time

#: A ``producers.daq.simulator.CcdSpec``: not imported here, since the simulator imports this.
CcdSpec = Any

#: A card's value as a header dump holds it: None is a card present with no value.
Value = str | int | float | bool | None
Cards = tuple[tuple[str, Value], ...]

#: What each camera writes besides its identity cards (real headers, HEADVER 2).
CAMERA_CARDS: dict[str, dict[str, Value]] = {
    "LSSTCam": {
        "TELESCOP": "Simonyi Survey Telescope",
        "PLATFORM": "lsstcam",
        "DAQPART": "camera",
        "TSTAND": "TMAMCv1_SUM",
    },
    "LSSTComCam": {
        "TELESCOP": "Simonyi Survey Telescope",
        "PLATFORM": "comcam",
        "DAQPART": "comcam",
        "TSTAND": "TMACCv1_SUM",
    },
    "LATISS": {"TELESCOP": "LSST AuxTelescope", "PLATFORM": "auxtel", "DAQPART": "lat", "TSTAND": None},
}
#: Seconds between the start of integration (DATE-BEG) and the readout (DATE-END) beyond the
#: exposure time: DARKTIME - EXPTIME in the real headers (shutter motion; a bias: clear only).
DARK_OVERHEAD = {"LSSTCam": 0.9318, "LSSTComCam": 0.4306, "LATISS": 0.2407}
BIAS_DARK_TIME = 0.092
#: LSSTCam's measured shutter time exceeds the requested one by about a millisecond.
SHUTTER_EXCESS = {"LSSTCam": 0.001}
#: GROUPID is the time the group was opened, a few seconds before its first exposure began.
GROUP_LEAD = 3.43
#: The observatory's place (real headers: Simonyi Survey Telescope; AuxTel has its own).
_SITE = {
    "OBS-LONG": -70.749417,
    "OBS-LAT": -30.244639,
    "OBS-ELEV": 2663.0,
    "OBSGEO-X": 1818938.94,
    "OBSGEO-Y": -5208470.95,
    "OBSGEO-Z": -3195172.08,
}
#: obs_lsst's sensor part numbers in CCD_TYPE (ITL science and guider, ITL wavefront, e2v).
_CCD_TYPE = {"ITL": "3800C", "ITL_G": "3800C", "ITL_WF": "4400", "E2V": "250"}


def _keys(text: str) -> frozenset[str]:
    """The card names in ``text``, separated by white space."""
    return frozenset(text.split())


#: Cards a template's values never survive in: the identity and times of the simulated CCD.
REPLACED = _keys(
    """INSTRUME OBSID CAMCODE TELCODE CONTRLLR DAYOBS SEQNUM GROUPID RAFTBAY CCDSLOT CCD_MANU
    CCD_TYPE FILENAME DETSIZE TIMESYS DATE MJD DATE-OBS MJD-OBS DATE-BEG MJD-BEG DATE-END MJD-END
    DATE-TRG MJD-TRG EXPTIME SHUTTIME DARKTIME XPOSURE TELAPSE"""
)
#: Cards naming one physical sensor: true of the template's own detector only (another gets our
#: LSST_NUM and none of the others).
HARDWARE = frozenset({"LSST_NUM", "CCD_SERN", "REBNAME", "RAFTNAME"})
#: The structure of a FITS HDU, and what belongs to the extensions a flattened dump includes.
_STRUCTURAL = _keys("SIMPLE BITPIX NAXIS EXTEND CHECKSUM DATASUM COMMENT HISTORY __CONTENT__ END")
_PLAIN_KEY = re.compile(r"^[A-Z0-9_-]{1,8}$")
_ISOT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$")


def load_template(path: Path) -> Cards:
    """The primary-header cards of a real header dump (YAML or JSON, card -> value, obs_lsst's
    ``tests/headers``), in order, without extensions' and FITS structure cards (README.md).
    ValueError if it is not such a dump."""
    path = Path(path)
    text = path.read_text()
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not a YAML or JSON header dump: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("PRIMARY"), dict):
        doc = doc["PRIMARY"]
    if not isinstance(doc, dict) or "INSTRUME" not in doc:
        raise ValueError(f"{path}: a header dump is a mapping of cards with an INSTRUME card")
    cards: list[tuple[str, Value]] = []
    for key, value in doc.items():
        key = str(key)
        if key == "XTENSION":
            break
        if key in _STRUCTURAL or key.startswith("NAXIS"):
            continue
        if isinstance(value, datetime):  # YAML reads an unquoted time as a datetime
            value = value.isoformat(timespec="milliseconds")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            continue  # lists (multi-line COMMENT) and the like: not one card
        cards.append((key, value))
    return tuple(cards)


def template_instrument(template: Cards) -> str:
    """The Butler instrument a template's INSTRUME names; ValueError if none we simulate."""
    raw = str(dict(template).get("INSTRUME") or "")
    name = HEADER_INSTRUMENTS.get(raw.strip().lower())
    if name is None or name not in CAMERA_CARDS:
        raise ValueError(f"template INSTRUME={raw!r} is not a camera we simulate")
    return name


def template_detector(template: Cards) -> int | None:
    """The detector a template was read from (RAFTBAY + CCDSLOT), None if it does not say."""
    cards = dict(template)
    instrument = template_instrument(template)
    raft, slot = cards.get("RAFTBAY"), cards.get("CCDSLOT")
    if instrument == "LATISS":
        raft = "RXX"
    try:
        return camera.detector_by_name(instrument, f"{raft}_{slot}").id
    except KeyError:
        return None


def identity_cards(spec: CcdSpec) -> dict[str, Value]:
    """The cards that make a CCD this CCD (``obsingest.dataid.identity_cards``), with its
    sensor's make and size, and a made-up LSST_NUM fixed per detector in the camera's form
    (``ITL-3800C-226``, ``E2V-CCD250-382``), so the translators' detector_serial has a value."""
    identity = DataId(spec.instrument, spec.exposure, spec.detector).identity(spec.controller)
    sensor, layout = spec.detector_info.sensor, spec.layout
    rows = layout.data_rows * (len(spec.amp_names) // 8)
    part = {"E2V": "CCD250", "ITL_WF": "4400B"}.get(sensor.name, "3800C")
    return {
        **dataid.identity_cards(identity),
        "CCD_MANU": sensor.manufacturer,
        "CCD_TYPE": _CCD_TYPE.get(sensor.name, "3800C"),
        "DETSIZE": f"[1:{layout.data_cols * 8},1:{rows}]",
        "LSST_NUM": f"{sensor.manufacturer}-{part}-{100 + spec.detector:03d}",
    }


def time_cards(spec: CcdSpec) -> dict[str, Value]:
    """DATE-*/MJD-* in TAI (``TIMESYS``), the group's time, and the three exposure durations."""
    begin = camera_time(spec.obs_start)
    end = camera_time(spec.obs_start + timedelta(seconds=spec.dark_time))
    cards: dict[str, Value] = {"DATE": end[0], "MJD": end[1]}
    for key, (isot, mjd) in (("OBS", begin), ("TRG", end), ("BEG", begin), ("END", end)):
        cards[f"DATE-{key}"], cards[f"MJD-{key}"] = isot, mjd
    return cards | {
        "TIMESYS": CAMERA_SCALE,
        "GROUPID": camera_time(spec.obs_start - timedelta(seconds=GROUP_LEAD))[0],
        "EXPTIME": float(spec.exposure_time),
        "DARKTIME": round(spec.dark_time, 4),
        "SHUTTIME": spec.shutter_time,
    }


#: The camera's card order (real LSSTCam header) around the site, pointing and weather cards.
_ORDER_SITE = """BINX BINY CCDGAIN CCDNOISE DATE MJD IMGTYPE DATE-OBS MJD-OBS DATE-TRG MJD-TRG OBSID
DATE-BEG MJD-BEG DATE-END MJD-END BUNIT TIMESYS GROUPID INSTRUME TELESCOP"""
_ORDER_CAMERA = """OBJECT VIGNETTE VIGN_MIN TESTTYPE CAMCODE CONTRLLR DAYOBS SEQNUM PROGRAM REASON
CURINDEX MAXINDEX TSTAND OBSANNOT CCD_MANU CCD_TYPE CCDSLOT RAFTBAY PLATFORM DAQPART DAQFOLD
LSST_NUM DETSIZE FILTBAND FILTER GRATING EXPTIME DARKTIME SHUTTIME"""
_ORDER_END = "SEEING HEADVER FILENAME"
#: Cards every simulated header carries with the same value (as the real ones do).
_FIXED: dict[str, Value] = {
    "BINX": 1,
    "BINY": 1,
    "CCDGAIN": 1.0,
    "CCDNOISE": 10.0,
    "BUNIT": "adu",
    "VIGNETTE": "NO",
    "VIGN_MIN": "NO",
    "PROGRAM": "obsingest-sim",
    "CURINDEX": 1,
    "MAXINDEX": 1,
    "OBSANNOT": "",
    "DAQFOLD": "raw",
    "SEEING": None,
    "HEADVER": 2,
}


def default_cards(
    spec: CcdSpec, pointing: dict[str, Value], weather: dict[str, Value]
) -> list[tuple[str, Value]]:
    """The whole primary header the simulator writes without a template, in the camera's
    order, with the exposure's ``pointing`` and ``weather`` cards in their places."""
    own = CAMERA_CARDS[spec.instrument]
    science = spec.exposure_time > 0
    imgtype = "OBJECT" if science else "BIAS"
    flt, band = physical_filter(spec.instrument, spec.filter)
    values: dict[str, Value] = {
        **_FIXED,
        **own,
        **identity_cards(spec),
        **time_cards(spec),
        "IMGTYPE": imgtype,
        "TESTTYPE": imgtype,
        "OBJECT": "simulated field" if science else "bias",
        "REASON": "science" if science else "calibration",
        "FILTBAND": band,
        # LATISS's without the grating the Butler appends: 'SDSSr_65mm~empty' is 'SDSSr_65mm' + GRATING
        "FILTER": flt.split("~", 1)[0],
    }
    if spec.instrument == "LATISS":
        values["GRATING"] = "empty_1"
    keys = [*_ORDER_SITE.split(), *_SITE, *pointing, *_ORDER_CAMERA.split(), *weather]
    keys += _ORDER_END.split()
    values |= _SITE | pointing | weather
    return [(key, values[key]) for key in keys if key in values]


def physical_filter(instrument: str, band_or_filter: str) -> tuple[str, str]:
    """(physical filter, band) for a band (``r`` -> LSSTCam ``r_57``) or a physical filter name."""
    if instrument not in camera.INSTRUMENTS:
        raise ValueError(f"unknown instrument {instrument!r}; known: {sorted(camera.INSTRUMENTS)}")
    filters = camera.INSTRUMENTS[instrument].filters
    if band_or_filter in filters:
        return filters[band_or_filter], band_or_filter
    for band, name in filters.items():
        if name == band_or_filter:
            return name, band
    return band_or_filter, band_or_filter[:1]


def templated_cards(spec: CcdSpec, template: Cards) -> list[tuple[str, Value]]:
    """The template's cards with this CCD's identity and times (module doc)."""
    if template_instrument(template) != spec.instrument:
        raise ValueError(f"the template is a {template_instrument(template)} header, not {spec.instrument}")
    fresh = identity_cards(spec) | time_cards(spec)
    cards = dict(template)
    own_detector = template_detector(template) == spec.detector
    if own_detector or "LSST_NUM" not in cards:
        del fresh["LSST_NUM"]  # the template's own serial, or none as the template has none
    if "DETSIZE" not in cards:  # the camera writes it in the extensions only
        del fresh["DETSIZE"]
    if "TELCODE" in cards and "CAMCODE" not in cards:  # older headers name it TELCODE
        fresh["TELCODE"] = fresh.pop("CAMCODE")
    if not isinstance(cards.get("GROUPID"), str) or not _ISOT.match(str(cards["GROUPID"])):
        fresh.pop("GROUPID")  # a group named otherwise ('ABCDEF'): the template's stays
    shift = _template_shift(cards, spec)
    out: list[tuple[str, Value]] = []
    for key, value in template:
        if key in fresh:
            out.append((key, fresh.pop(key)))
        elif key in HARDWARE and not own_detector:
            continue
        else:
            out.append((key, _shifted(key, value, shift)))
    out.extend(fresh.items())  # the identity and time cards the template lacked
    return out


def _template_shift(cards: dict[str, Value], spec: CcdSpec) -> timedelta | None:
    """How far the simulated exposure's start lies from the template's (None: no start)."""
    start = cards.get("DATE-BEG") or cards.get("DATE-OBS")
    if not isinstance(start, str):
        return None
    try:
        was = header_time(start, str(cards.get("TIMESYS") or "UTC")).utc.to_datetime()
    except ValueError:
        return None
    return spec.obs_start.replace(tzinfo=None) - was


def _shifted(key: str, value: Value, shift: timedelta | None) -> Value:
    """Another time card of the template (HIERARCH SHUTTER ... TAI ISOT / MJD), moved along."""
    if shift is None or value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and _ISOT.match(value) and ("DATE" in key or "ISOT" in key):
        moved = datetime.fromisoformat(value) + shift
        return moved.isoformat(timespec="milliseconds")
    if isinstance(value, float) and re.search(r"(^|[ .])MJD", key):
        return value + shift / timedelta(days=1)
    return value


#: Comments on the cards whose meaning is not obvious from their name.
COMMENTS = {
    "DATE-BEG": "start of integration (TIMESYS)",
    "DATE-END": "readout (TIMESYS)",
    "TIMESYS": "DATE-* and MJD-* are TAI",
    "OBSID": "observation id",
    "DAYOBS": "observing day, YYYYMMDD",
    "SEQNUM": "sequence number within the day",
    "EXPTIME": "requested exposure time [s]",
    "SHUTTIME": "measured shutter time [s]",
    "DARKTIME": "integration to readout [s]",
    "CONTRLLR": "controller: O = OCS",
}


def _card_bytes(key: str, value: Value) -> bytes:
    """One header record (80 bytes, or more for astropy's long-string and HIERARCH forms).

    Common cards by hand (fast): None is a card present and empty (the camera's ``SEEING``),
    floats keep every digit; long keywords and strings go through astropy. Memoised below:
    every CCD of an exposure repeats most of its primary header."""
    comment = COMMENTS.get(key, "")
    if _PLAIN_KEY.match(key):
        if value is None:
            return f"{key:<8}= {'':<20}".ljust(CARD).encode("ascii")
        if isinstance(value, float) and math.isfinite(value):  # every digit, as FITS writes it
            text = repr(value).upper()
            if "." not in text and "E" not in text:
                text += ".0"
            text = text if len(text) <= 20 else f"{value:.15G}"
            line = f"{key:<8}= {text:>20}" + (f" / {comment}" if comment else "")
            return line[:CARD].ljust(CARD).encode("ascii")
        try:
            return make_card(key, value, comment)
        except ValueError:
            pass  # a string too long for one card
    from astropy.io import fits

    if not _PLAIN_KEY.match(key):  # dumps spell HIERARCH cards 'STUTTER ROWS' or dotted
        key = "HIERARCH " + key.removeprefix("HIERARCH.").replace(".", " ")
    return fits.Card(key, value, comment).image.encode("ascii")


card_bytes = card_memo(_card_bytes)


def header_records(cards: Iterable[tuple[str, Value]]) -> list[bytes]:
    """The 80-byte records of ``cards`` (a long card may take several)."""
    records: list[bytes] = []
    for key, value in cards:
        image = card_bytes(key, value)
        records.extend(image[i : i + CARD] for i in range(0, len(image), CARD))
    return records
