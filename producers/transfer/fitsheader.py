"""Give a cached CCD file the identity of a new exposure, in place, in microseconds: the harness
reuses the same pixels every exposure, but the register function refuses a header naming another
exposure than its object name. Same card widths (nothing moves); the primary CHECKSUM recomputed.
"""

from __future__ import annotations

import re

from obsingest.errors import CorruptFile
from obsingest.fits import CARD, card_key, checksum_words, encode_checksum, make_card, parse_primary

#: a card's value field: blanks, a quoted string ('' escapes a quote) if any, up to the comment
_VALUE = re.compile(r"\s*('(?:[^']|'')*'?)?[^/]*")


def _comment(card: bytes | bytearray) -> str:
    """The comment after the value field (``/ ...``), '' if none."""
    return _VALUE.sub("", bytes(card[10:]).decode("ascii"), count=1)[1:].strip()


def retarget_primary_header(buf: bytearray, values: dict[str, int | str]) -> None:
    """Rewrite the given cards of the primary header in ``buf`` in place (comments kept): KeyError
    if one is missing (not a file the harness generated). A CHECKSUM is recomputed, for a primary
    HDU without data only (NAXIS = 0, DATASUM = 0; ValueError otherwise)."""
    try:
        hdu = parse_primary(buf)
    except CorruptFile as exc:
        raise ValueError(f"not a FITS primary header: {exc}") from None
    positions = {card_key(card): i * CARD for i, card in enumerate(hdu.cards)}
    missing = set(values) - set(positions)
    if missing:
        raise KeyError(f"primary header lacks {sorted(missing)}")
    for key, value in values.items():
        at = positions[key]
        buf[at : at + CARD] = make_card(key, value, _comment(buf[at : at + CARD]))
    if "CHECKSUM" not in positions:
        return
    if hdu.int_value("NAXIS", 0):
        raise ValueError("primary HDU has data; only header-only primaries are retargeted")
    at = positions["CHECKSUM"]
    comment = _comment(buf[at : at + CARD])
    buf[at : at + CARD] = make_card("CHECKSUM", "0" * 16, comment)
    total = checksum_words(buf[: hdu.data_offset])
    buf[at : at + CARD] = make_card("CHECKSUM", encode_checksum(~total & 0xFFFFFFFF), comment)
