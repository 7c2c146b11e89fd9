"""A FITS header (``obsingest.fits.Hdu``) as the mapping of typed values translators read.

astro_metadata_translator reads headers as ``card -> value`` with FITS types: strings (trailing
blanks dropped), ``True``/``False``, ints, floats, and ``None`` for a card present with no value
(``FILTER  =``), which the translators treat as "not defined" and default with a warning. Values
are parsed when first asked for, so a cached exposure costs only the cards its key reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from obsingest.fits import Hdu, parse_string, value_text

_INT = re.compile(r"[+-]?\d+$")


def card_value(text: str | None) -> Any:
    """The typed value of a card's value text (``fits.value_text``)."""
    if text is None or text == "":
        return None
    if text.startswith("'"):
        return parse_string(text)
    if text == "T":
        return True
    if text == "F":
        return False
    if _INT.match(text):
        return int(text)
    try:
        return float(text.replace("D", "E"))
    except ValueError:
        return text


class HduHeader(Mapping[str, Any]):
    """Read-only typed view of one HDU's keyword cards (first card of each keyword wins), the
    long-keyword ``HIERARCH`` cards included (``HIERARCH SIMULATE ATDOME = 0`` is the card
    ``SIMULATE ATDOME``, as astropy names it)."""

    def __init__(self, hdu: Hdu) -> None:
        self._hdu = hdu
        self._values: dict[str, Any] = {}
        self._hierarch: dict[str, Any] | None = None

    def raw_key(self, keys: tuple[bytes, ...], simulated: bool = True) -> tuple[Any, ...]:
        """The cards ``keys`` (padded 8-byte keywords) as written, and (``simulated``) every card
        that mentions SIMULATE: a cache key as good as the typed values (equal text, equal
        value) at a fraction of the cost of parsing them."""
        index = self._hdu.keywords
        if not simulated:
            return tuple(index.get(key) for key in keys)
        found = tuple(card for card in self._hdu.cards if b"SIMULATE" in card)
        return (tuple(index.get(key) for key in keys), found)

    def _long_cards(self) -> dict[str, Any]:
        if self._hierarch is None:
            found: dict[str, Any] = {}
            for card in self._hdu.cards:
                if card.startswith(b"HIERARCH ") and b"=" in card:
                    key, _, rest = card[9:].decode("ascii", "replace").partition("=")
                    found.setdefault(key.strip(), card_value(value_text(rest)))
            self._hierarch = found
        return self._hierarch

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            pass
        try:
            padded = key.encode("ascii").ljust(8)
        except UnicodeEncodeError:
            raise KeyError(key) from None
        if len(padded) != 8 or padded not in self._hdu.keywords:
            return self._long_cards()[key]
        value = card_value(self._hdu.value(key))
        self._values[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            if key.encode("ascii").ljust(8) in self._hdu.keywords:
                return True
        except UnicodeEncodeError:
            return False
        return key in self._long_cards()

    def __iter__(self) -> Iterator[str]:
        yield from (k.decode("ascii", "replace").rstrip() for k in self._hdu.keywords)
        yield from self._long_cards()

    def __len__(self) -> int:
        return len(self._hdu.keywords) + len(self._long_cards())
