"""A strict, dependency-free walk over a FITS file's HDU structure.

The register function must refuse truncated or garbled files before registering them, and must
do it in milliseconds: this reads only the headers, computes each HDU's data size from BITPIX,
NAXISn, PCOUNT and GCOUNT, and requires the file to end exactly where the last HDU does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from obsingest.errors import CorruptFile

BLOCK = 2880
CARD = 80


@dataclass(frozen=True)
class Hdu:
    index: int
    header: dict[str, str | int | float | bool]
    header_offset: int
    data_offset: int
    data_size: int


@dataclass(frozen=True)
class FitsInfo:
    hdus: list[Hdu] = field(default_factory=list)

    @property
    def primary(self) -> dict[str, str | int | float | bool]:
        return self.hdus[0].header

    @property
    def is_tile_compressed(self) -> bool:
        return any(h.header.get("ZIMAGE") is True for h in self.hdus[1:])


def _value(raw: str) -> str | int | float | bool:
    raw = raw.strip()
    if raw.startswith("'"):
        end = raw.find("'", 1)
        while end != -1 and raw[end + 1 : end + 2] == "'":
            end = raw.find("'", end + 2)
        if end == -1:
            raise ValueError("unterminated string")
        return raw[1:end].replace("''", "'").rstrip()
    raw = raw.split("/", 1)[0].strip()
    if raw == "T":
        return True
    if raw == "F":
        return False
    try:
        return int(raw)
    except ValueError:
        return float(raw.replace("D", "E"))


def _parse_header(data: bytes, offset: int, where: str) -> tuple[dict, int]:
    header: dict[str, str | int | float | bool] = {}
    pos = offset
    while True:
        if pos + BLOCK > len(data):
            raise CorruptFile(f"{where}: truncated inside a header at byte {pos}")
        block = data[pos : pos + BLOCK]
        pos += BLOCK
        for i in range(0, BLOCK, CARD):
            card = block[i : i + CARD]
            try:
                text = card.decode("ascii")
            except UnicodeDecodeError:
                raise CorruptFile(
                    f"{where}: non-ASCII header card at byte {pos - BLOCK + i}"
                ) from None
            key = text[:8].rstrip()
            if key == "END":
                return header, pos
            if text[8:10] == "= " and key:
                try:
                    header[key] = _value(text[10:])
                except ValueError:
                    raise CorruptFile(f"{where}: unparsable value of {key!r}") from None


def inspect(data: bytes, name: str = "file") -> FitsInfo:
    """Header-level structure of ``data``; CorruptFile naming ``name`` and the reason otherwise."""
    if not data.startswith(b"SIMPLE  =                    T"):
        raise CorruptFile(f"{name}: not a FITS file (no SIMPLE = T card)")
    hdus: list[Hdu] = []
    pos = 0
    while pos < len(data):
        where = f"{name} HDU {len(hdus)}"
        start = pos
        header, pos = _parse_header(data, pos, where)
        try:
            bitpix = int(header["BITPIX"])
            naxis = int(header["NAXIS"])
            dims = [int(header[f"NAXIS{i}"]) for i in range(1, naxis + 1)]
        except (KeyError, ValueError, TypeError):
            raise CorruptFile(f"{where}: missing or invalid BITPIX/NAXIS keywords") from None
        if bitpix not in (8, 16, 32, 64, -32, -64) or any(d < 0 for d in dims):
            raise CorruptFile(f"{where}: invalid BITPIX {bitpix} or axis lengths {dims}")
        count = 0
        if naxis:
            count = 1
            for d in dims:
                count *= d
        size = (
            abs(bitpix) // 8 * int(header.get("GCOUNT", 1)) * (int(header.get("PCOUNT", 0)) + count)
        )
        padded = -(-size // BLOCK) * BLOCK
        if pos + padded > len(data):
            raise CorruptFile(
                f"{where}: truncated: data needs {padded} bytes from offset {pos}, "
                f"file has {len(data) - pos}"
            )
        hdus.append(Hdu(len(hdus), header, start, pos, size))
        pos += padded
        if pos < len(data) and not data[pos : pos + 8].startswith(b"XTENSION"):
            raise CorruptFile(f"{name}: garbage after HDU {len(hdus) - 1} at byte {pos}")
    return FitsInfo(hdus)
