"""Rubin-style JSON header sidecars (``<stem>.json`` beside ``<stem>.fits``, producers/edge/README.md),
merged into the primary header before compression so the stored CCD is self-describing; non-FITS
keys and non-scalar values are skipped (and logged).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile
from obsingest.fits import BLANK_CARD, CARD, Hdu, card_key, header_bytes, make_card, parse_primary
from obsingest.logs import get_logger, log_event
from producers.edge.errors import BadManifest, SourceVanished
from producers.edge.identity import Cards, check_sidecar_identity

log = get_logger("obsingest.edge")

_KEYWORD = re.compile(r"^[A-Z0-9_-]{1,8}$")
_RESERVED = frozenset(
    {"SIMPLE", "BITPIX", "NAXIS", "NAXIS1", "NAXIS2", "EXTEND", "END", "CHECKSUM", "DATASUM"}
)
Scalar = str | int | float | bool


def load_sidecar(path: Path) -> dict[str, Scalar]:
    """The sidecar's primary-header cards; BadManifest if it is not such a JSON object."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SourceVanished(f"{path}: header sidecar vanished before it was read") from None
    except (OSError, ValueError) as exc:
        raise BadManifest(f"{path}: header sidecar is not valid JSON: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("PRIMARY"), dict):
        doc = doc["PRIMARY"]
    if not isinstance(doc, dict):
        raise BadManifest(f"{path}: header sidecar must be a JSON object of keyword -> value")
    cards: dict[str, Scalar] = {}
    skipped = []
    for key, value in doc.items():
        if _KEYWORD.match(key) and key not in _RESERVED and isinstance(value, (str, int, float, bool)):
            cards[key] = value
        elif key != "PRIMARY":
            skipped.append(key[:40])
    if skipped:
        log_event(log, "edge.sidecar_skipped", path=str(path), keys=skipped[:20])
    return cards


def check_sidecar(path: Path, data_id: DataId, raw: bytes | bytearray) -> None:
    """The sidecar is readable and, over the file's header ``raw``, names no other CCD (for a
    pre-compressed hand-off, which it is not merged into)."""
    check_sidecar_identity(_cards_of(_primary(raw)), load_sidecar(path), data_id, path)


def _primary(raw: bytes | bytearray) -> Hdu | None:
    """The primary header; None if not FITS (the compressor or the check says so)."""
    try:
        return parse_primary(raw)
    except CorruptFile:
        return None


def _cards_of(primary: Hdu | None) -> Cards:
    return primary.str_value if primary is not None else lambda _key: None


def merge_sidecar(raw: bytearray, path: Path, data_id: DataId) -> bytearray:
    """``raw`` with the sidecar's cards set in its primary header (existing cards replaced)."""
    cards = load_sidecar(path)
    primary = _primary(raw)
    check_sidecar_identity(_cards_of(primary), cards, data_id, path)
    if not cards or primary is None:
        return raw
    header = list(primary.cards)
    old_size = primary.data_offset
    while header and header[-1] == BLANK_CARD:
        header.pop()
    position = {card_key(c): i for i, c in enumerate(header)}
    for key, value in cards.items():
        try:
            card = make_card(key, value, "from header sidecar")
        except (ValueError, TypeError):
            continue  # a value too long for one card: keep the file's own
        if key in position:
            header[position[key]] = card
        else:
            position[key] = len(header)
            header.append(card)
    new = header_bytes(header)
    if len(new) <= old_size:
        # same size as before (blank cards before END): the data stays where it is, no copy
        new = header_bytes(header + [BLANK_CARD] * ((old_size - len(new)) // CARD))
        raw[:old_size] = new
        return raw
    return bytearray(new) + raw[old_size:]
