"""Give a cached CCD file the identity of a new exposure, in place, in microseconds.

The harness reads the same pixels every exposure (generating 16 fresh 75 MB CCDs every interval
would load the two cores it measures), but the register function refuses a file whose primary
header names another exposure than its object name. So each read buffer gets its primary header's
exposure cards rewritten (EXPID, SEQNUM, DAYOBS, OBSID; same card widths, nothing moves) and,
when the primary HDU carries a FITS CHECKSUM (our compressor writes one, like fpack), that
checksum is recomputed so the file stays valid for funpack/astropy. Pure bytes in, bytes out.
"""

from __future__ import annotations

BLOCK = 2880
CARD = 80

_EXCLUDED = frozenset(b":;<=>?@[\\]^_`")


def _ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    """32-bit ones' complement sum of big-endian words (the FITS checksum arithmetic)."""
    total = 0
    view = memoryview(data)
    for i in range(0, len(view), 4):
        total += int.from_bytes(view[i : i + 4], "big")
    while total >> 32:
        total = (total & 0xFFFFFFFF) + (total >> 32)
    return total


def encode_checksum(value: int) -> str:
    """ASCII encoding of a 32-bit checksum (FITS checksum convention, Seaman et al.)."""
    chars = [0] * 16
    for i in range(4):
        byte = (value >> (24 - 8 * i)) & 0xFF
        quotient, remainder = divmod(byte, 4)
        group = [quotient + 0x30] * 4
        group[0] += remainder
        changed = True
        while changed:
            changed = False
            for j in (0, 2):
                while group[j] in _EXCLUDED or group[j + 1] in _EXCLUDED:
                    group[j] += 1
                    group[j + 1] -= 1
                    changed = True
        for j in range(4):
            chars[4 * j + i] = group[j]
    return bytes(chars[-1:] + chars[:-1]).decode("ascii")


def _card_key(card: bytes | bytearray) -> str:
    return bytes(card[:8]).decode("ascii").strip()


def _comment(card: bytes | bytearray) -> str:
    """The comment after the value field (``/ ...``), '' if none."""
    text = bytes(card[10:]).decode("ascii")
    start = 0
    if text.lstrip().startswith("'"):
        start = text.index("'") + 1
        while True:
            end = text.index("'", start)
            if text[end + 1 : end + 2] == "'":
                start = end + 2
                continue
            start = end + 1
            break
    slash = text.find("/", start)
    return text[slash + 1 :].strip() if slash >= 0 else ""


def format_card(key: str, value: int | str, comment: str = "") -> bytes:
    """One fixed-format 80-byte card (integers right-aligned, strings quoted, in 20 columns)."""
    if isinstance(value, int):
        text = f"{value:>20d}"
    else:
        quoted = "'" + value.replace("'", "''").ljust(8) + "'"
        text = f"{quoted:<20}"
    line = f"{key:<8}= {text}"
    if comment:
        line = f"{line} / {comment}"
    return line[:CARD].ljust(CARD).encode("ascii")


def _primary_header_end(buf: bytearray) -> int:
    """Offset just past the primary header's last block; ValueError if there is no END."""
    for offset in range(0, len(buf) - CARD + 1, CARD):
        if bytes(buf[offset : offset + 8]) == b"END     ":
            return offset - offset % BLOCK + BLOCK
    raise ValueError("no END card: not a FITS file")


def exposure_cards(exposure: int, obsid_prefix: str = "MC") -> dict[str, int | str]:
    """The primary-header cards that name an exposure, as the DAQ simulator writes them."""
    day_obs, seq_num = divmod(exposure, 100_000)
    return {
        "EXPID": exposure,
        "SEQNUM": seq_num,
        "DAYOBS": str(day_obs),
        "OBSID": f"{obsid_prefix}_O_{day_obs}_{seq_num:06d}",
    }


def retarget_primary_header(buf: bytearray, values: dict[str, int | str]) -> None:
    """Rewrite the given cards of the primary header in ``buf`` in place (comments kept).

    Every key must already be present (KeyError otherwise: the file is not what the harness
    generated). A primary HDU with a CHECKSUM card gets it recomputed; the harness's primary
    HDUs carry no data (NAXIS = 0, DATASUM = 0), which ValueError enforces.
    """
    end = _primary_header_end(buf)
    positions = {_card_key(buf[o : o + CARD]): o for o in range(0, end, CARD)}
    missing = set(values) - set(positions)
    if missing:
        raise KeyError(f"primary header lacks {sorted(missing)}")
    for key, value in values.items():
        at = positions[key]
        buf[at : at + CARD] = format_card(key, value, _comment(buf[at : at + CARD]))
    if "CHECKSUM" not in positions:
        return
    if (
        "NAXIS" in positions
        and bytes(buf[positions["NAXIS"] + 10 : positions["NAXIS"] + 30]).strip() != b"0"
    ):
        raise ValueError("primary HDU has data; only header-only primaries are retargeted")
    at = positions["CHECKSUM"]
    comment = _comment(buf[at : at + CARD])
    buf[at : at + CARD] = format_card("CHECKSUM", "0" * 16, comment)
    total = _ones_complement_sum(buf[:end])
    buf[at : at + CARD] = format_card("CHECKSUM", encode_checksum(~total & 0xFFFFFFFF), comment)
