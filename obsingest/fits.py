"""Minimal, strict FITS structure reader and writer helpers (header cards and block layout).

Read by hand, headers only: callers need only where each HDU is. Every fault is a
``FitsFormatError`` carrying the CFITSIO status fpack exits with, so ``obsingest compress`` is an
fpack drop-in. numpy is imported only by the checksum helper, for that command's start-up.
One cohesive concept: the block and card layout read and written in one place, so they agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from obsingest.errors import CorruptFile

if TYPE_CHECKING:
    import numpy as np

BLOCK = 2880
CARD = 80
END_CARD = b"END".ljust(CARD)
BLANK_CARD = b" " * CARD
_KEY = re.compile(rb"^[A-Z0-9_-]{0,8} *$")
#: a run of whole header cards whose keyword fields are valid (what ``read_header`` checks)
_CARD_RUN = re.compile(
    rb"(?s:(?:" + rb"|".join(rb"[A-Z0-9_-]{%d} {%d}" % (k, 8 - k) for k in range(8, -1, -1)) + rb").{72})*"
)

#: CFITSIO status codes (fitsio.h) and the text fpack prints for them (ffgerr)
STATUS_TEXT = {
    104: "could not open the named file",
    105: "couldn't create the named file",
    107: "tried to move past end of file",
    108: "error reading from FITS file",
    202: "keyword not found in header",
    207: "illegal character in keyword",
    211: "illegal BITPIX keyword value",
    212: "illegal NAXIS keyword value",
    213: "illegal NAXISn keyword value",
    214: "illegal PCOUNT keyword value",
    215: "illegal GCOUNT keyword value",
    252: "1st key not SIMPLE or XTENSION",
    403: "keyword value not integer",
}
_BITPIX = (8, 16, 32, 64, -32, -64)
_INT_STATUS = {"BITPIX": 211, "NAXIS": 212, "PCOUNT": 214, "GCOUNT": 215}


class FitsFormatError(CorruptFile):
    """The bytes are not valid FITS; ``status`` is the CFITSIO status fpack reports for it and
    ``hdu`` the 0-based HDU it was found in (None: the file as a whole)."""

    def __init__(self, message: str, status: int = 108, hdu: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.hdu = hdu


@dataclass(frozen=True)
class Hdu:
    """One header-data unit: its header cards (END excluded) and where its data lies."""

    index: int
    cards: tuple[bytes, ...]
    data_offset: int
    data_size: int
    #: first ``KEY = value`` card per padded keyword: lookups in O(1), not a scan per keyword
    keywords: dict[bytes, bytes] = field(default_factory=dict, compare=False, repr=False)
    #: integer values already read (a compressor asks for BITPIX and NAXIS* several times)
    ints: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.keywords:
            index = self.keywords
            for card in self.cards:
                if card[8:10] == b"= ":
                    index.setdefault(card[:8], card)

    def value(self, key: str) -> str | None:
        """Raw value text of the first card named ``key`` (strings keep their quotes)."""
        card = self.keywords.get(_padded_key(key))
        return None if card is None else value_text(card[10:].decode("ascii", "replace"))

    def int_value(self, key: str, default: int | None = None) -> int:
        known = self.ints.get(key)
        if known is not None:
            return known
        text = self.value(key)
        if text is None:
            if default is not None:
                return default
            raise FitsFormatError(f"HDU {self.index}: missing required keyword {key}", 202, self.index)
        try:
            number = self.ints[key] = int(text)
        except ValueError:
            status = _INT_STATUS.get(key, 213 if key.startswith("NAXIS") else 403)
            raise FitsFormatError(
                f"HDU {self.index}: keyword {key} is not an integer: {text!r}", status, self.index
            ) from None
        return number

    def str_value(self, key: str) -> str | None:
        text = self.value(key)
        return parse_string(text) if text is not None and text.startswith("'") else text

    @property
    def is_primary(self) -> bool:
        return self.index == 0

    @property
    def shape(self) -> tuple[int, ...]:
        """Image axes in FITS order (NAXIS1 first)."""
        naxis = self.int_value("NAXIS")
        return tuple(self.int_value(f"NAXIS{i}") for i in range(1, naxis + 1))


#: a FITS string value: a quote, then characters with quotes doubled, then (unless cut) a quote
_STRING = re.compile(r"'((?:[^']|'')*)'?")


def parse_string(text: str) -> str:
    """The string a quoted value holds (``'it''s'`` -> ``it's``), trailing blanks dropped."""
    match = _STRING.match(text)
    return match.group(1).replace("''", "'").rstrip() if match else ""


#: keyword field -> keyword: headers repeat a few hundred (bounded: a garbled header adds none)
_KEYWORDS: dict[bytes, str] = {}


def card_key(card: bytes) -> str:
    field = card[:8]
    key = _KEYWORDS.get(field)
    if key is None:
        key = field.decode("ascii", "replace").rstrip()
        if len(_KEYWORDS) < 4096:
            _KEYWORDS[field] = key
    return key


@lru_cache(maxsize=4096)  # a few hundred keywords, each padded once
def _padded_key(key: str) -> bytes:
    return key.encode("ascii").ljust(8)


def value_text(text: str) -> str:
    """What follows a card's ``=``, its comment dropped (a string keeps its quotes)."""
    text = text.strip()
    if text.startswith("'"):
        match = _STRING.match(text)
        return text[: match.end() if match else len(text)]
    return text.split("/", 1)[0].strip()


def read_header(buf: memoryview, offset: int, index: int) -> tuple[tuple[bytes, ...], int]:
    """Cards of the header starting at ``offset`` and the offset of its data unit."""
    cards: list[bytes] = []
    pos = offset
    size = len(buf)
    while True:
        if pos + BLOCK > size:
            raise FitsFormatError(
                f"truncated: header of HDU {index} at byte {offset} has no END card "
                f"before end of file ({size} bytes)",
                107,
                index,
            )
        block = bytes(buf[pos : pos + BLOCK])
        pos += BLOCK
        end = block.find(END_CARD)
        while end >= 0 and end % CARD:
            end = block.find(END_CARD, end + 1)
        if end < 0:
            end = BLOCK
        # One regex over the block's cards; the per-card scan runs only to name a bad one.
        if not _CARD_RUN.fullmatch(block, 0, end):
            for at in range(0, end, CARD):
                if not _KEY.match(block[at : at + 8]):
                    raise FitsFormatError(
                        f"HDU {index}: invalid header card at byte {pos - BLOCK + at}: "
                        f"{block[at : at + 20]!r}",
                        207,
                        index,
                    )
        cards += [block[at : at + CARD] for at in range(0, end, CARD)]
        if end < BLOCK:
            return tuple(cards), pos


def parse_fits(data: bytes | bytearray | memoryview) -> list[Hdu]:
    """Every HDU of a FITS file, validated for structure; FitsFormatError on bad bytes."""
    buf = memoryview(data)
    size = len(buf)
    if size == 0:
        raise FitsFormatError("empty file: 0 bytes", 107)
    # CFITSIO reads a whole block before it looks at the first card: shorter files are 108
    short = 108 if size < BLOCK else None
    if bytes(buf[:10]) != b"SIMPLE  = ":
        raise FitsFormatError("not a FITS file: does not start with SIMPLE =", short or 252)
    if size % BLOCK:
        raise FitsFormatError(
            f"truncated: {size} bytes is not a whole number of {BLOCK}-byte FITS blocks", short or 107
        )
    hdus: list[Hdu] = []
    offset = 0
    while offset < size:
        index = len(hdus)
        if index and bytes(buf[offset : offset + 10]) != b"XTENSION= ":
            if not bytes(buf[offset:]).strip(b"\0 "):
                break  # trailing blank blocks are allowed after the last HDU
            raise FitsFormatError(f"HDU {index} at byte {offset} does not start with XTENSION", 252, index)
        cards, data_offset = read_header(buf, offset, index)
        hdu = _sized_hdu(index, cards, data_offset)
        data_size = hdu.data_size
        if data_offset + data_size > size:
            raise FitsFormatError(
                f"truncated: HDU {index} needs {data_size} data bytes at byte {data_offset}, "
                f"file has only {size - data_offset}",
                107,
                index,
            )
        hdus.append(hdu)
        offset = data_offset + padded(data_size)
    return hdus


def _sized_hdu(index: int, cards: tuple[bytes, ...], data_offset: int) -> Hdu:
    """The HDU with these cards and the size of its data unit."""
    first = b"".join(cards[:7])
    table = _standard_table(first, 0, len(first))
    if table is not None:
        return Hdu(index, cards, data_offset, table[1], ints=table[0])
    hdu = Hdu(index, cards, data_offset, 0)
    return Hdu(index, cards, data_offset, _unit_size(hdu.int_value, index), hdu.keywords, hdu.ints)


def _unit_size(value: Callable[[str, int | None], int], index: int) -> int:
    """Bytes of the data unit whose sizing cards ``value(key, default)`` reads; FitsFormatError
    when one is invalid."""
    bitpix = value("BITPIX", None)
    if bitpix not in _BITPIX:
        raise FitsFormatError(f"HDU {index}: invalid BITPIX {bitpix}", 211, index)
    naxis = value("NAXIS", None)
    if not 0 <= naxis <= 999:
        raise FitsFormatError(f"HDU {index}: invalid NAXIS {naxis}", 212, index)
    pixels = 1
    for i in range(1, naxis + 1):
        n = value(f"NAXIS{i}", None)
        if n < 0:
            raise FitsFormatError(f"HDU {index}: negative axis length {n}", 213, index)
        pixels *= n
    pcount, gcount = value("PCOUNT", 0), value("GCOUNT", 1)
    # a negative count would make the data size negative: the walk would go back (for ever)
    for key, count in (("PCOUNT", pcount), ("GCOUNT", gcount)):
        if count < 0:
            raise FitsFormatError(f"HDU {index}: invalid {key} {count}", _INT_STATUS[key], index)
    return abs(bitpix) // 8 * gcount * (pcount + pixels) if naxis else 0


_STANDARD_KEYS = ("BITPIX", "NAXIS", "NAXIS1", "NAXIS2", "PCOUNT", "GCOUNT")
#: the first cards of a 2-axis extension as the standard orders them; each value field captured
_TABLE_CARDS = re.compile(
    rb"(?s)XTENSION= .{70}" + b"".join(k.encode().ljust(8) + rb"= (.{70})" for k in _STANDARD_KEYS)
)


def _standard_table(data: bytes, start: int, end: int) -> tuple[dict[str, int], int] | None:
    """(these keywords' values, the data unit's size) of a 2-axis extension's header
    ``data[start:end]`` whose first cards are XTENSION and them in the standard's order (so each
    is the first card of its name, as ``Hdu`` reads them), all valid: the usual extension (a
    compressed image's table). None when in any doubt (``_unit_size`` reads them)."""
    table = _TABLE_CARDS.match(data, start)
    if table is None or table.end() > end:
        return None
    try:  # int() of the bytes accepts only what it accepts of the decoded text
        values = [int(value.split(b"/", 1)[0]) for value in table.groups()]
    except ValueError:
        return None
    bitpix, naxis, width, rows, pcount, gcount = values
    if bitpix not in _BITPIX or naxis != 2 or min(values[2:]) < 0:
        return None
    return dict(zip(_STANDARD_KEYS, values, strict=True)), abs(bitpix) // 8 * gcount * (pcount + width * rows)


def parse_primary(head: bytes | bytearray | memoryview) -> Hdu:
    """The primary header from the first bytes of a file (its data and the HDUs after it need
    not be there): for a reader that knows the rest of the file is whole by other means (a
    checksum); FitsFormatError on bad bytes, or when ``head`` ends before the END card."""
    buf = memoryview(head)
    if bytes(buf[:10]) != b"SIMPLE  = ":
        raise FitsFormatError("not a FITS file: does not start with SIMPLE =", 252)
    cards, data_offset = read_header(buf, 0, 0)
    return Hdu(0, cards, data_offset, 0)


def primary_header(data: bytes | bytearray | memoryview) -> Hdu:
    """``parse_fits(data)[0]`` for a valid file, checked the same way without building card
    tuples; anything not plainly valid goes to ``parse_fits`` for its exact FitsFormatError."""
    raw = data if isinstance(data, bytes) else bytes(data)
    found = _walk(raw)
    return found if found is not None else parse_fits(raw)[0]


def _walk(data: bytes) -> Hdu | None:
    """The primary HDU when every HDU is plainly valid, None when in any doubt."""
    size = len(data)
    if not size or size % BLOCK or not data.startswith(b"SIMPLE  = "):
        return None
    primary: Hdu | None = None
    offset = 0
    while offset < size:
        if primary is not None and not data.startswith(b"XTENSION= ", offset):
            return primary if not data[offset:].strip(b"\0 ") else None
        end = data.find(END_CARD, offset)
        while end >= 0 and (end - offset) % CARD:
            end = data.find(END_CARD, end + 1)
        if end < 0 or not _CARD_RUN.fullmatch(data, offset, end):
            return None
        data_offset = offset + padded(end + CARD - offset)
        data_size = _data_size(data, offset, end)
        if data_size is None or data_offset + data_size > size:
            return None
        if primary is None:
            cards = tuple(data[i : i + CARD] for i in range(0, end, CARD))
            primary = Hdu(0, cards, data_offset, data_size)
        offset = data_offset + padded(data_size)
    return primary


def _data_size(data: bytes, start: int, end: int) -> int | None:
    """``_unit_size`` of the header ``data[start:end]``; None when a card that sizes it is missing
    or invalid. Each value is the first ``KEY = value`` card's, as ``Hdu`` reads it."""
    table = _standard_table(data, start, end)
    if table is not None:
        return table[1]

    def value(key: str, default: int | None) -> int:
        field = key.encode().ljust(8) + b"= "
        at = data.find(field, start, end)
        while at >= 0 and (at - start) % CARD:
            at = data.find(field, at + 1, end)
        if at < 0:
            if default is None:
                raise FitsFormatError(f"no {key}")
            return default
        try:  # int() of the bytes accepts only what it accepts of the decoded text
            return int(data[at + 10 : at + CARD].split(b"/", 1)[0])
        except ValueError:
            raise FitsFormatError(f"{key} is not an integer") from None

    try:
        return _unit_size(value, 0)
    except FitsFormatError:
        return None


def padded(n: int) -> int:
    """``n`` rounded up to whole 2880-byte FITS blocks."""
    return n + (-n % BLOCK)


def card_memo(build: Callable[..., bytes], size: int = 16384) -> Callable[..., bytes]:
    """``build(key, value, *rest)`` memoised, for writers that make the same few hundred cards
    per CCD. The value's type is part of the key (``True`` vs ``1``), a float is keyed by its
    ``repr`` (``-0.0``); cleared at ``size`` cards; errors are not memoised."""
    cards: dict[tuple[object, ...], bytes] = {}

    def memoised(key: str, value: object, *rest: object) -> bytes:
        kind = type(value)
        cache_key = (key, kind, repr(value) if kind is float else value, *rest)
        card = cards.get(cache_key)
        if card is None:
            card = build(key, value, *rest)
            if len(cards) >= size:
                cards.clear()
            cards[cache_key] = card
        return card

    return memoised


def format_card(key: str, value: object, comment: str = "") -> bytes:
    """One fixed-format 80-byte header card; a too-long comment is cut, a too-long value is an
    error (it would change the value). ``make_card`` is it memoised; this, for a value written
    once (a checksum)."""
    if isinstance(value, bool):
        text = f"{'T' if value else 'F':>20}"
    elif isinstance(value, int):
        text = f"{value:>20d}"
    elif isinstance(value, float):
        text = f"{value:>20.6f}" if abs(value) < 1e12 else f"{value:>20.10E}"
    elif isinstance(value, str):
        quoted = "'" + value.replace("'", "''").ljust(8) + "'"
        text = f"{quoted:<20}"
    else:
        raise TypeError(f"unsupported FITS value {value!r}")
    line = f"{key:<8}= {text}"
    if len(line) > CARD:
        raise ValueError(f"card too long: {line!r}")
    if comment:
        line = f"{line} / {comment}"
    return line[:CARD].ljust(CARD).encode("ascii")


#: ``format_card`` memoised (``card_memo``; arguments by position)
make_card = card_memo(format_card)


def header_bytes(cards: list[bytes] | tuple[bytes, ...]) -> bytes:
    """Cards + END, padded with blanks to whole blocks."""
    raw = b"".join([*cards, END_CARD])
    return raw + b" " * (-len(raw) % BLOCK)


def rename_card(card: bytes, new_key: str) -> bytes:
    """The same card under another keyword (value and comment kept byte for byte)."""
    return new_key.encode("ascii").ljust(8) + card[8:]


# --- FITS checksums (CHECKSUM / DATASUM cards) ---------------------------------------------


def checksum_words(data: bytes | bytearray | np.ndarray, start: int = 0) -> int:
    """Ones'-complement sum of big-endian 32-bit words (FITS checksum convention)."""
    import numpy as np

    arr = np.frombuffer(data, dtype=np.uint8)
    if extra := arr.size % 4:
        arr = np.concatenate([arr, np.zeros(4 - extra, np.uint8)])
    s = start + int(arr.view(">u4").sum(dtype=np.uint64))
    while hi := s >> 32:
        s = (s & 0xFFFFFFFF) + hi
    return s


_EXCLUDE = frozenset(range(0x3A, 0x41)) | frozenset(range(0x5B, 0x61))


def _encode_byte(byte: int) -> tuple[int, int, int, int]:
    """The four characters one byte of the checksum becomes (before the final rotation)."""
    quotient, remainder = byte // 4 + ord("0"), byte % 4
    ch = [quotient + remainder, quotient, quotient, quotient]
    again = True
    while again:
        again = False
        for j in (0, 2):
            while ch[j] in _EXCLUDE or ch[j + 1] in _EXCLUDE:
                ch[j] += 1
                ch[j + 1] -= 1
                again = True
    return ch[0], ch[1], ch[2], ch[3]


#: each byte value's four characters: every byte is encoded on its own, so a table lookup
_ENCODED = tuple(_encode_byte(b) for b in range(256))


def encode_checksum(value: int) -> str:
    """FITS checksum ASCII encoding (Seaman et al., FITS checksum proposal, A.7.2): the four
    characters of byte i go to places i, i+4, i+8, i+12, and the 16 are rotated right by one."""
    a, b, c, d = (_ENCODED[byte] for byte in (value & 0xFFFFFFFF).to_bytes(4, "big"))
    return bytes(
        (d[3], a[0], b[0], c[0], d[0], a[1], b[1], c[1], d[1], a[2], b[2], c[2], d[2], a[3], b[3], c[3])
    ).decode("ascii")
