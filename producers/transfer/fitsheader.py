"""Give a cached CCD file the identity of a new exposure, in place, in microseconds: the harness
reuses the same pixels every exposure, but the register function refuses a header naming another
exposure than its object name. Same card widths (nothing moves); the primary CHECKSUM recomputed.
"""

from __future__ import annotations

import re

from obsingest.fits import BLOCK, CARD, checksum_words, encode_checksum, make_card

#: a card's value field: blanks, a quoted string ('' escapes a quote) if any, up to the comment
_VALUE = re.compile(r"\s*('(?:[^']|'')*'?)?[^/]*")


def _comment(card: bytes | bytearray) -> str:
    """The comment after the value field (``/ ...``), '' if none."""
    return _VALUE.sub("", bytes(card[10:]).decode("ascii"), count=1)[1:].strip()


def _primary_header_end(buf: bytearray) -> int:
    """Offset just past the primary header's last block; ValueError if there is no END."""
    for offset in range(0, len(buf) - CARD + 1, CARD):
        if bytes(buf[offset : offset + 8]) == b"END     ":
            return offset - offset % BLOCK + BLOCK
    raise ValueError("no END card: not a FITS file")


def retarget_primary_header(buf: bytearray, values: dict[str, int | str]) -> None:
    """Rewrite the given cards of the primary header in ``buf`` in place (comments kept): KeyError
    if one is missing (not a file the harness generated). A CHECKSUM is recomputed, for a primary
    HDU without data only (NAXIS = 0, DATASUM = 0; ValueError otherwise)."""
    end = _primary_header_end(buf)
    positions = {bytes(buf[o : o + 8]).decode("ascii").strip(): o for o in range(0, end, CARD)}
    missing = set(values) - set(positions)
    if missing:
        raise KeyError(f"primary header lacks {sorted(missing)}")
    for key, value in values.items():
        at = positions[key]
        buf[at : at + CARD] = make_card(key, value, _comment(buf[at : at + CARD]))
    if "CHECKSUM" not in positions:
        return
    if "NAXIS" in positions and bytes(buf[positions["NAXIS"] + 10 : positions["NAXIS"] + 30]).strip() != b"0":
        raise ValueError("primary HDU has data; only header-only primaries are retargeted")
    at = positions["CHECKSUM"]
    comment = _comment(buf[at : at + CARD])
    buf[at : at + CARD] = make_card("CHECKSUM", "0" * 16, comment)
    total = checksum_words(buf[:end])
    buf[at : at + CARD] = make_card("CHECKSUM", encode_checksum(~total & 0xFFFFFFFF), comment)
