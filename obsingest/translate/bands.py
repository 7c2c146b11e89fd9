"""The band of a physical filter, as Rubin's filter tables name it.

Not part of ObservationInfo: the Butler's physical_filter record carries it. It follows from the
filter's name (after the header fixes, which may rename the filter; FILTBAND is not read for that
reason): ``i_39``, ``g_01``, ``SDSSr_65mm~empty`` are i, g, r; empty slots, the pinhole and no
filter are ``white``; a name outside the tables is its own band, as the Butler registers it.
"""

from __future__ import annotations

import re

_BANDS = "ugrizy"
#: filters that pass every band (an empty slot, the pinhole, the "empty" filter, none)
_WHITE = re.compile(r"^(empty(_\d+)?|none|ph_5|ef_43)$")
_LSST = re.compile(r"^([ugrizy])(_\d+)?$")
_SDSS = re.compile(r"^SDSS([ugrizy])(_65mm)?$")


def band(physical_filter: str | None) -> str | None:
    """The band of ``physical_filter``."""
    if not physical_filter:
        return None
    primary = physical_filter.split("~", 1)[0]
    if primary == "unknown":
        return "unknown"
    for pattern in (_LSST, _SDSS):
        match = pattern.match(primary)
        if match:
            return match.group(1)
    if _WHITE.match(primary):
        return "white"
    return physical_filter
