"""The one refusal of header translation: a header that does not say which CCD it is."""

from __future__ import annotations

from typing import Any

from obsingest.errors import HeaderMismatch


class NoIdentity(HeaderMismatch, reason="bad-header"):
    """A header yields no identity (instrument, exposure, detector, day, ...): permanent.

    ``card`` names the card(s) the identity comes from (``DAYOBS+SEQNUM``), ``value`` what the
    header holds there (a tuple for several cards; ``KeyError``: absent), ``why`` the reason.
    """

    def __init__(self, card: str, value: Any = KeyError, why: str = "not in the header") -> None:
        cards = card.split("+")
        values = value if isinstance(value, tuple) and len(value) == len(cards) else (value,)
        shown = " ".join(
            f"{c}={'(absent)' if v is KeyError else repr(v)}" for c, v in zip(cards, values, strict=False)
        )
        super().__init__(f"header {shown} gives no identity: {why}")
        self.card = card
        self.why = why
