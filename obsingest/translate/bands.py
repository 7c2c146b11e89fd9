"""The band of a physical filter, as Rubin's filter tables name it.

Not part of ObservationInfo: the Butler's physical_filter record carries it. It follows from the
filter's name (after the header fixes, which may rename the filter; FILTBAND is not read for that
reason): ``i_39``, ``g_01``, ``SDSSr_65mm~empty`` are i, g, r; empty slots, the pinhole and no
filter are ``white``; a name outside the tables is its own band, as the Butler registers it.
"""

from __future__ import annotations

import re

#: filters that pass every band (an empty slot, the pinhole, the "empty" filter, none)
_WHITE = re.compile(r"^(empty(_\d+)?|none|ph_5|ef_43)$")
_LSST = re.compile(r"^([ugrizy])(_\d+)?$")
_SDSS = re.compile(r"^SDSS([ugrizy])(_65mm)?$")


#: bands of named filters outside those patterns, as obs_lsst's filter definitions give them
#: (LATISS's filters and the BOT test stand's lamps and projectors; facts, not code)
_NAMED = {
    **dict.fromkeys(("blank_bk7_wg05", "collimator", "cyl_lens", "pinhole"), "white"),
    **dict.fromkeys(("KPNO_1111_436nm", "BG40", "BG40_65mm_1", "BG40_65mm_2"), "g"),
    **dict.fromkeys(("OG550_65mm_1", "OG550_65mm_2", "480nm"), "g"),
    **dict.fromkeys(("KPNO_373A_677nm", "RG610", "FELH0600", "650nm"), "r"),
    **{"750nm": "i", "KPNO_406_828nm": "z", "870nm": "z", "950nm": "y", "970nm": "y"},
    **{"SDSSY": "y", "quadnotch1": "notch", "OG590_2_5mm": "OG590"},
    **{name: name for name in ("grid", "spot", "sparsegrid", "streak", "ellipses")},
    # the CCOB's lamps, behind LSSTCam's white slots
    **{"HIGH": "white", "LOW": "white", "uv": "u", "blue": "g", "red": "r", "nm750": "i"},
    **{"nm850": "z", "nm960": "y"},
}
#: a neutral-density filter of the BOT test stand: its band is the other filter's plus "~nd"
_ND = re.compile(r"^ND_OD[0-9.]+$")


def _single(name: str) -> str | None:
    """The band of one filter (no ``~``); None when the tables do not name it."""
    if name == "unknown":
        return "unknown"
    for pattern in (_LSST, _SDSS):
        match = pattern.match(name)
        if match:
            return match.group(1)
    if _WHITE.match(name):
        return "white"
    return _NAMED.get(name)


def band(physical_filter: str | None) -> str | None:
    """The band of ``physical_filter``: of its first filter (LATISS's filter~grating), or of the
    second when the first passes every band (empty slots, LSSTCam's white before a CCOB lamp);
    ``{band}~nd`` with a neutral-density filter; the name itself when the tables lack it."""
    if not physical_filter:
        return None
    parts = physical_filter.split("~")
    if len(parts) == 1 and _ND.match(parts[0]):
        return "white~nd"
    first = _single(parts[0])
    if first is None:
        return physical_filter
    if len(parts) == 2 and _ND.match(parts[1]):
        return f"{first}~nd"
    if len(parts) == 2 and first == "white":
        second = _single(parts[1])
        if second not in (None, "unknown"):
            return second
    return first
