"""The six real Rubin headers (tests/fixtures/real_headers) and what Rubin's translators make of
them, for the translation tests; and those headers written as FITS primary headers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from obsingest.fits import header_bytes, make_card, primary_header
from obsingest.translate.observe import DETECTOR_CARDS, EXPOSURE_CARDS

FOLDER = Path(__file__).resolve().parents[3] / "fixtures" / "real_headers"
EXPECTED: list[dict[str, Any]] = json.loads((FOLDER / "expected-observation-info.json").read_text())
#: the LSSTCam wavefront header's telescope cards are null: Rubin applied a correction file
WAVEFRONT = "lsstCam-MC_O_20251121_000156_R44_SW0.json"
#: cards a primary header must not carry from these merged primary + extension dumps
_STRUCTURE = {"SIMPLE", "BITPIX", "EXTEND", "XTENSION", "PCOUNT", "GCOUNT", "TFIELDS", "END"}


def read(name: str) -> dict[str, Any]:
    path = FOLDER / name
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def wavefront_correction(folder: Path) -> Path:
    """Write the correction file Rubin applies to the wavefront header, into ``folder``.

    Why the test writes one: the camera wrote that exposure's telescope cards (pointing, rotator,
    target, vignetting) as null, and Rubin's raw ingest filled them from a per-observation
    correction file (``LSSTCam-MC_O_20251121_000156.yaml`` in obs_lsst's ``corrections/``,
    which is not copied here). The values below are the telescope state Rubin's translator
    reports for that exposure (expected-observation-info.json) plus the cards that say how to
    read them (ICRS RA/Dec tracking, sky rotator frame, not vignetted); fix_header finds the
    file on the search path by instrument and obs id, as it finds obs_lsst's.
    """
    expected = next(e for e in EXPECTED if e["file"] == WAVEFRONT)
    ra, dec = expected["tracking_radec"]
    alt, az = expected["altaz_begin"]
    cards = {
        "RASTART": ra,
        "DECSTART": dec,
        "ELSTART": alt,
        "AZSTART": az,
        "ROTPA": float(expected["boresight_rotation_angle"].split()[0]),
        "ROTCOORD": "sky",
        "TRACKSYS": "RADEC",
        "RADESYS": "ICRS",
        "OBJECT": expected["object"],
        "VIGN_MIN": "NO",
    }
    path = folder / f"LSSTCam-{expected['observation_id']}.yaml"
    path.write_text(yaml.safe_dump(cards))
    return folder


def _value_text(value: Any) -> str | None:
    """The FITS value text of a header value, floats to full precision (None: not writable)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return None if not math.isfinite(value) else repr(value).upper()
    if isinstance(value, str):
        return "'" + value.replace("'", "''").ljust(8) + "'"
    return None


def fits_primary(header: dict[str, Any]):
    """``header`` written as a FITS primary header and parsed back (``obsingest.fits``).

    Keys of more than 8 characters become HIERARCH cards; cards that cannot be written (dotted
    PropertyList names, lists) are left out, and must not be cards the translation reads.
    """
    cards = [make_card("SIMPLE", True), make_card("BITPIX", 8), make_card("NAXIS", 0)]
    cards.append(make_card("EXTEND", True))
    for key, value in header.items():
        text = _value_text(value)
        if key in _STRUCTURE or key.startswith(("NAXIS", "TTYPE", "TFORM", "Z")):
            continue
        if text is None or "." in key or key.startswith("__"):
            assert key not in EXPOSURE_CARDS + DETECTOR_CARDS, key
            continue
        line = f"{key:<8}= {text:>20}" if len(key) <= 8 and " " not in key else None
        if line is None:
            line = f"HIERARCH {key} = {text}"
        if key == "COMMENT" or len(line) > 80:
            assert key not in EXPOSURE_CARDS + DETECTOR_CARDS, key
            continue
        cards.append(line.ljust(80).encode("ascii"))
    return primary_header(header_bytes(cards))
