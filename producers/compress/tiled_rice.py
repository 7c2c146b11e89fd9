"""Parallel tiled Rice compression of FITS images into fpack-compatible ``.fits.fz`` files.

Each image HDU (a raw CCD's amplifiers are independent) is one thread-pool task for our RICE_1
coder (``_rice.c``: byte-identical to CFITSIO's, releases the GIL); headers, tile descriptors,
heap and checksums are written here in fpack's layout. Integer images (BITPIX 16, 32; NAXIS 1 or
2) are compressed losslessly, other HDUs copied unchanged. Output is deterministic (no timestamp
in CHECKSUM comments), so a re-sent CCD has the same checksum.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import TypeVar

from obsingest.errors import CorruptFile
from obsingest.fits import (
    BLANK_CARD,
    BLOCK,
    CARD,
    Hdu,
    card_key,
    encode_checksum,
    format_card,
    header_bytes,
    make_card,
    parse_fits,
    rename_card,
)
from producers.compress import _rice
from producers.compress.output import publish

__all__ = ["BLOCKSIZE", "CompressionResult", "Tiling", "compress_file", "compress_fits", "plan", "run_jobs"]

#: Rice block size in pixels: FITS/fpack default.
BLOCKSIZE = 32
RICE_BITPIX = (16, 32)

#: fpack's tile specification (``-t``): sizes per axis, first axis first. A first axis <= 0 or
#: another axis < 0 means the whole axis, 0 on another axis means 1, unnamed axes are 1 (so
#: ``(0, 1)`` is fpack's default, row by row). ``None``: one tile per image (fpack's ``-w``).
Tiling = tuple[int, ...] | None
#: one piece of work: returns the byte parts of one output HDU
Job = Callable[[], list[bytes]]
T = TypeVar("T")

#: image keywords that become Z-keywords in the compressed header (fpack's mapping: Z + last 7 letters)
_Z_KEYS = ("SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT", "CHECKSUM", "DATASUM")
TO_Z = {key: "Z" + key[-7:] for key in _Z_KEYS}


@dataclass(frozen=True)
class CompressionResult:
    """Sizes and wall time of one compression (what the CLI and benchmarks report)."""

    raw_bytes: int
    compressed_bytes: int
    seconds: float
    threads: int
    tile_rows: int | None

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.compressed_bytes if self.compressed_bytes else 0.0


def is_rice_image(hdu: Hdu) -> bool:
    """Whether we compress this HDU (else it is copied unchanged)."""
    if hdu.int_value("BITPIX") not in RICE_BITPIX or hdu.data_size == 0:
        return False
    if hdu.int_value("NAXIS") not in (1, 2):
        return False
    return hdu.int_value("GCOUNT", 1) == 1 and hdu.int_value("PCOUNT", 0) == 0


def tile_shape(tiling: Tiling, axes: Sequence[int]) -> tuple[int, int]:
    """(columns, rows) of one tile of an image with these axes, fpack's rules, clipped to it."""
    ncols, nrows = axes[0], (axes[1] if len(axes) == 2 else 1)
    if tiling is None:
        return ncols, nrows
    cols = tiling[0] if tiling and tiling[0] > 0 else ncols
    rows = tiling[1] if len(tiling) > 1 else 1
    rows = nrows if rows < 0 else max(rows, 1)
    return min(cols, ncols), min(rows, nrows)


def rows_tiling(tile_rows: int | None) -> Tiling:
    """The ``tile_rows`` of the library API as a Tiling: whole rows, N at a time."""
    if tile_rows is None:
        return None
    if tile_rows < 1:
        raise ValueError(f"tile_rows must be >= 1, not {tile_rows}")
    return (0, tile_rows)


def _checksummed(prefix: bytes, cards: list[bytes], data_parts: Sequence[bytes]) -> bytes:
    """Header bytes ``prefix`` + ``cards`` (no CHECKSUM/DATASUM among them, no blank card in
    ``prefix``) with DATASUM and CHECKSUM cards for these data bytes (all but the last a multiple
    of 4 bytes long), END and padding. CHECKSUM is summed as 16 zeros, then written in place."""
    datasum = 0
    for part in data_parts:
        datasum = _rice.checksum(part, datasum)
    # Like CFITSIO: new cards take the place of trailing blank cards, so the header keeps its size.
    at = len(cards)
    while at > 0 and cards[at - 1] == BLANK_CARD and len(cards) - at < 2:
        at -= 1
    head = bytearray(
        header_bytes([prefix, *cards[:at], _ZERO_CHECKSUM, format_card("DATASUM", str(datasum), _DSUM)])
    )
    value = len(prefix) + at * CARD + _CHECKSUM_VALUE
    total = _rice.checksum(head, datasum)
    head[value : value + 16] = encode_checksum(~total & 0xFFFFFFFF).encode("ascii")
    return bytes(head)


_DSUM = "data unit checksum"
_ZERO_CHECKSUM = make_card("CHECKSUM", "0" * 16, "HDU checksum")
#: where the 16 characters of the CHECKSUM value start in its card (after ``KEY = '``)
_CHECKSUM_VALUE = 11


_SUM_KEYS = ("CHECKSUM", "DATASUM")
_SUMS = (b"CHECKSUM", b"DATASUM")  # what such a card starts with: card_key is asked only then


def without_checksums(cards: Sequence[bytes]) -> list[bytes]:
    """Cards minus CHECKSUM/DATASUM; blank cards refill their place if the header ends in blanks
    (the inverse of CFITSIO writing them over trailing blanks, so round trips are byte-exact)."""
    kept = [c for c in cards if not (c.startswith(_SUMS) and card_key(c) in _SUM_KEYS)]
    if kept and kept[-1] == BLANK_CARD:
        kept += [BLANK_CARD] * (len(cards) - len(kept))
    return kept


def _cards(*cards: tuple[str, object, str]) -> bytes:
    return b"".join(make_card(*card) for card in cards)


# The cards of a compressed image's header that are the same for every HDU, joined once.
_TABLE_HEAD = _cards(
    ("XTENSION", "BINTABLE", "binary table extension"),
    ("BITPIX", 8, "8-bit bytes"),
    ("NAXIS", 2, "2-dimensional binary table"),
    ("NAXIS1", 8, "width of table in bytes"),
)
_TABLE_FIELDS = _cards(
    ("GCOUNT", 1, "one data group (required keyword)"),
    ("TFIELDS", 1, "number of fields in each row"),
    ("TTYPE1", "COMPRESSED_DATA", "label for field   1"),
)
_ZIMAGE = _cards(("ZIMAGE", True, "extension contains compressed image"))
_RICE_PARAMS = _cards(
    ("ZCMPTYPE", "RICE_1", "compression algorithm"),
    ("ZNAME1", "BLOCKSIZE", "compression block size"),
    ("ZVAL1", BLOCKSIZE, "pixels per block"),
    ("ZNAME2", "BYTEPIX", "bytes per pixel (1, 2, 4, or 8)"),
)
_TILE = "size of tiles to be compressed"
_BYTEPIX = "bytes per pixel (1, 2, 4, or 8)"


@lru_cache(maxsize=4096)
def _z_field(field: bytes) -> bytes:
    """A keyword field's Z-keyword field (b"" when the card keeps its keyword), as fpack renames."""
    key = card_key(field)
    if key.startswith("NAXIS"):
        return ("Z" + key).encode("ascii").ljust(8)
    return TO_Z[key].encode("ascii").ljust(8) if key in TO_Z else b""


def _z_cards(hdu: Hdu) -> list[bytes]:
    """The image's cards as they go into the compressed header: sizing keywords renamed."""
    first, *rest = hdu.cards
    cards = [rename_card(first, "ZSIMPLE" if hdu.is_primary else "ZTENSION")]
    for card in rest:
        new = _z_field(card[:8])
        cards.append(new + card[8:] if new else card)
    return cards


def _pack_image(buf: memoryview, hdu: Hdu, tiling: Tiling, checksum: bool) -> list[bytes]:
    """One image HDU -> [header, table, heap, padding] of its compressed BINTABLE HDU."""
    bytepix = hdu.int_value("BITPIX") // 8
    shape = hdu.shape
    ncols, nrows = shape[0], (shape[1] if len(shape) == 2 else 1)
    tile_cols, tile_rows = tile_shape(tiling, shape)
    table, heap, longest = _rice.pack_image(
        buf, hdu.data_offset, bytepix, ncols, nrows, tile_cols, tile_rows, BLOCKSIZE
    )
    prefix = b"".join(
        [
            _TABLE_HEAD,
            make_card("NAXIS2", len(table) // 8, "number of rows in table"),
            make_card("PCOUNT", len(heap), "size of special data area"),
            _TABLE_FIELDS,
            make_card("TFORM1", f"1PB({longest})", "data format of field: variable array"),
            _ZIMAGE,
            make_card("ZTILE1", tile_cols, _TILE),
            make_card("ZTILE2", tile_rows, _TILE) if len(shape) == 2 else b"",
            _RICE_PARAMS,
            make_card("ZVAL2", bytepix, _BYTEPIX),
        ]
    )
    cards = _z_cards(hdu)
    pad = b"\0" * (-(len(table) + len(heap)) % BLOCK)
    head = _checksummed(prefix, cards, [table, heap]) if checksum else header_bytes([prefix, *cards])
    return [head, table, heap, pad]


def _copy_hdu(buf: memoryview, hdu: Hdu, checksum: bool, as_primary: bool = False) -> list[bytes]:
    data = bytes(buf[hdu.data_offset : hdu.data_offset + hdu.data_size])
    pad = b"\0" * (-len(data) % BLOCK)
    cards = list(hdu.cards)
    if as_primary:
        cards = [
            make_card("SIMPLE", True, "file does conform to FITS standard"),
            make_card("BITPIX", 8, "number of bits per data pixel"),
            make_card("NAXIS", 0, "number of data axes"),
            make_card("EXTEND", True, "FITS dataset may contain extensions"),
        ]
        data, pad = b"", b""
    head = _checksummed(b"", without_checksums(cards), [data]) if checksum else header_bytes(cards)
    return [head, data, pad]


def _hdu_job(buf: memoryview, hdu: Hdu, tiling: Tiling, checksum: bool) -> list[bytes]:
    if is_rice_image(hdu):
        return _pack_image(buf, hdu, tiling, checksum)
    return _copy_hdu(buf, hdu, checksum)


def plan(buf: memoryview, tiling: Tiling = None, checksum: bool = True) -> tuple[list[Hdu], list[Job]]:
    """The HDUs of a FITS file and the output ``.fits.fz`` as independent jobs, in file order:
    each returns the byte parts of one output HDU. Raises FitsFormatError (a CorruptFile) if the
    bytes are not valid FITS; the jobs may run on any threads."""
    hdus = parse_fits(buf)
    jobs: list[Job] = []
    if is_rice_image(hdus[0]):
        # fpack moves a primary image into extension 1 behind an empty primary HDU.
        jobs.append(partial(_copy_hdu, buf, hdus[0], checksum, as_primary=True))
    jobs += [partial(_hdu_job, buf, hdu, tiling, checksum) for hdu in hdus]
    return hdus, jobs


def workers(threads: int | None) -> int:
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    return threads or os.cpu_count() or 1


def run_jobs(jobs: Sequence[Callable[[], T]], threads: int | None) -> list[T]:
    """Results of ``jobs`` in order, on up to ``threads`` threads (default: CPU count)."""
    count = min(workers(threads), len(jobs))
    if count <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda job: job(), jobs))


def _compress_parts(
    data: bytes | bytearray | memoryview | mmap.mmap, threads: int | None, tiling: Tiling, checksum: bool
) -> list[bytes]:
    buf = memoryview(data)
    try:
        _, jobs = plan(buf, tiling, checksum)
        return [part for parts in run_jobs(jobs, threads) for part in parts]
    finally:
        with contextlib.suppress(BufferError):  # arrays held by a traceback keep it exported
            buf.release()


@contextlib.contextmanager
def mapped_file(path: Path) -> Iterator[mmap.mmap | bytes]:
    """A file as a read-only memory map (no copy of a raw CCD into the Python heap), its pages
    mapped in one call (MAP_POPULATE) rather than one fault per 4 KiB page."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise CorruptFile(f"input file does not exist: {path}") from None
    with fh:
        if not os.fstat(fh.fileno()).st_size:
            yield b""
            return
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        mapped = mmap.mmap(fh.fileno(), 0, flags=flags, prot=mmap.PROT_READ)
        try:
            yield mapped
        finally:
            with contextlib.suppress(BufferError):  # a traceback may still hold a view
                mapped.close()


def compress_fits(
    raw: bytes | bytearray | Path,
    threads: int | None = None,
    tile_rows: int | None = None,
    *,
    checksum: bool = True,
) -> bytes:
    """Compress a FITS file (bytes or path) to ``.fits.fz`` bytes, amplifiers in parallel on
    ``threads`` (default: CPU count), ``tile_rows`` rows per tile (default: one tile per HDU),
    CHECKSUM/DATASUM as fpack writes them. CorruptFile if the input is not valid FITS."""
    tiling = rows_tiling(tile_rows)
    if isinstance(raw, (str, Path)):
        with mapped_file(Path(raw)) as data:
            return b"".join(_compress_parts(data, threads, tiling, checksum))
    return b"".join(_compress_parts(raw, threads, tiling, checksum))


def compress_file(
    src: Path, dst: Path, threads: int | None = None, tile_rows: int | None = None, *, checksum: bool = True
) -> CompressionResult:
    """Compress file ``src`` into ``dst`` (atomic: temp + rename); timed read+compress+write."""
    from obsingest.logs import get_logger, log_event  # not needed by the command line path

    start = time.perf_counter()
    tiling = rows_tiling(tile_rows)
    with mapped_file(Path(src)) as data:
        parts = _compress_parts(data, threads, tiling, checksum)
        raw_bytes = len(data)
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    written = publish(Path(dst), parts)
    result = CompressionResult(raw_bytes, written, time.perf_counter() - start, workers(threads), tile_rows)
    fields = {**asdict(result), "seconds": round(result.seconds, 4)}
    log_event(get_logger(__name__), "compressed", src=str(src), dst=str(dst), **fields)
    return result
