"""The one refusal of header translation: a header that does not say which CCD it is."""

from __future__ import annotations

from typing import Any

from obsingest.errors import HeaderMismatch


class NoIdentity(HeaderMismatch):
    """A header yields no identity (instrument, exposure, detector, day, ...): permanent.

    ``card`` names the card(s) the identity comes from, ``value`` what the header holds there
    (``KeyError``: the card is absent), ``why`` the translator's reason.
    """

    reason = "bad-header"

    def __init__(self, card: str, value: Any = KeyError, why: str = "not in the header") -> None:
        shown = "absent" if value is KeyError else f"{value!r}"
        super().__init__(f"header {card} ({shown}) gives no identity: {why}")
        self.card = card
        self.why = why
