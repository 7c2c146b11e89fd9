"""Back from ``.fits.fz``: restore plain FITS (``decompress_fits``, funpack for our RICE_1 files
and fpack's) and prove that a written file restores its input (``verify_plan``, before ``-D/-F``
delete or overwrite it). Decoding is ``_rice.unpack_image`` (a whole HDU per call, no GIL,
bounds-checked); HDUs are independent jobs for a thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from obsingest.errors import CorruptFile
from obsingest.fits import BLOCK, Hdu, card_key, header_bytes, padded, parse_fits, rename_card
from producers.compress import _rice
from producers.compress.tiled_rice import (
    BLOCKSIZE,
    RICE_BITPIX,
    TO_Z,
    is_rice_image,
    run_jobs,
    without_checksums,
)

__all__ = ["decompress_fits", "unpack_data", "verify_plan"]

# Keywords of the compressed BINTABLE itself and the image's checksums, dropped when the image
# header is restored (it is restored without checksum cards).
_FROM_Z = {v: k for k, v in TO_Z.items()}
_BINTABLE_ONLY = (
    {"XTENSION", "BITPIX", "NAXIS", "PCOUNT", "GCOUNT", "TFIELDS", "THEAP"}
    | {"ZIMAGE", "ZCMPTYPE", "ZQUANTIZ", "ZDITHER0"}
    | {"CHECKSUM", "DATASUM", "ZHECKSUM", "ZDATASUM"}
)
_BINTABLE_PREFIXES = ("NAXIS", "TTYPE", "TFORM", "TUNIT", "ZTILE", "ZNAME", "ZVAL")


def is_compressed_image(hdu: Hdu) -> bool:
    return not hdu.is_primary and hdu.str_value("XTENSION") == "BINTABLE" and hdu.value("ZIMAGE") == "T"


def unpack_data(buf: memoryview, hdu: Hdu) -> bytes:
    """The image data unit (big-endian pixels, unpadded) of a RICE_1 compressed image HDU."""
    where = f"HDU {hdu.index}"
    algorithm = hdu.str_value("ZCMPTYPE")
    if algorithm != "RICE_1":
        raise CorruptFile(f"{where}: unsupported compression {algorithm!r} (only RICE_1)")
    if hdu.str_value("TTYPE1") != "COMPRESSED_DATA" or not (
        (hdu.str_value("TFORM1") or "").startswith(("1PB", "PB"))
    ):
        raise CorruptFile(f"{where}: expected COMPRESSED_DATA as 1PB descriptors in column 1")
    bitpix = hdu.int_value("ZBITPIX")
    if bitpix not in RICE_BITPIX:
        raise CorruptFile(f"{where}: unsupported ZBITPIX {bitpix}")
    naxis = hdu.int_value("ZNAXIS")
    if naxis not in (1, 2):
        raise CorruptFile(f"{where}: unsupported ZNAXIS {naxis}")
    axes = [hdu.int_value(f"ZNAXIS{i}") for i in range(1, naxis + 1)]
    ncols, nrows = axes[0], (axes[1] if naxis == 2 else 1)
    tile_cols = hdu.int_value("ZTILE1", ncols)
    tile_rows = hdu.int_value("ZTILE2", 1) if naxis == 2 else 1
    blocksize = BLOCKSIZE
    for i in (1, 2, 3):
        if hdu.str_value(f"ZNAME{i}") == "BLOCKSIZE":
            blocksize = hdu.int_value(f"ZVAL{i}")
    row_bytes = hdu.int_value("NAXIS1")
    ntiles = hdu.int_value("NAXIS2")
    heap_offset = hdu.data_offset + hdu.int_value("THEAP", row_bytes * ntiles)
    heap_size = hdu.data_offset + hdu.data_size - heap_offset
    if ncols < 1 or nrows < 1 or tile_cols < 1 or tile_rows < 1:
        raise CorruptFile(f"{where}: tiles of {tile_cols} x {tile_rows} for {ncols} x {nrows}")
    # CFITSIO writes a requested tile larger than the image as is (fpack -t 1000,1000)
    tile_cols, tile_rows = min(tile_cols, ncols), min(tile_rows, nrows)
    needed = -(-ncols // tile_cols) * -(-nrows // tile_rows)
    if ntiles != needed:
        raise CorruptFile(f"{where}: {ntiles} tiles in table, image needs {needed}")
    try:
        return _rice.unpack_image(
            buf,
            hdu.data_offset,
            row_bytes,
            heap_offset,
            heap_size,
            bitpix // 8,
            ncols,
            nrows,
            tile_cols,
            tile_rows,
            blocksize,
        )
    except ValueError as exc:
        raise CorruptFile(f"{where}: RICE_1 data does not decode: {exc}") from None


def _decompress_image(buf: memoryview, hdu: Hdu) -> tuple[list[bytes], bool]:
    """A compressed BINTABLE HDU -> (parts of the plain image HDU, whether it was primary)."""
    data = unpack_data(buf, hdu)
    was_primary = hdu.value("ZSIMPLE") is not None
    cards: list[bytes] = []
    rest: list[bytes] = []
    for card in hdu.cards:
        key = card_key(card)
        if key in _BINTABLE_ONLY or key.startswith(_BINTABLE_PREFIXES):
            continue
        if key.startswith("ZNAXIS"):
            cards.append(rename_card(card, key[1:]))
        elif key in _FROM_Z:
            cards.append(rename_card(card, _FROM_Z[key]))
        else:
            rest.append(card)
    order = ("SIMPLE", "XTENSION", "BITPIX", "NAXIS", *(f"NAXIS{i}" for i in (1, 2)))
    order += ("EXTEND",) if was_primary else ("PCOUNT", "GCOUNT")
    mandatory = sorted((c for c in cards if card_key(c) in order), key=lambda c: order.index(card_key(c)))
    others = [c for c in cards if card_key(c) not in order]
    head = header_bytes(mandatory + others + rest)
    return [head, data, b"\0" * (-len(data) % BLOCK)], was_primary


def decompress_fits(fz: bytes, threads: int | None = None) -> bytes:
    """Restore a plain FITS file, without checksum cards, from ``.fits.fz`` bytes (RICE_1 integer
    images; rest copied), HDUs in parallel on ``threads`` (default: CPU count). CorruptFile when
    the bytes are not a valid compressed file."""
    buf = memoryview(fz)
    hdus = parse_fits(buf)

    def job(hdu: Hdu) -> tuple[list[bytes], bool]:
        if is_compressed_image(hdu):
            return _decompress_image(buf, hdu)
        data = bytes(buf[hdu.data_offset : hdu.data_offset + padded(hdu.data_size)])
        data = data.ljust(padded(hdu.data_size), b"\0")
        return [header_bytes(without_checksums(list(hdu.cards))), data], False

    results = run_jobs([partial(job, hdu) for hdu in hdus], threads)
    parts: list[bytes] = []
    for index, (hdu_parts, was_primary) in enumerate(results):
        if was_primary and index == 1:
            parts = []  # the image was fpack'ed out of the primary HDU: put it back there
        parts += hdu_parts
    return b"".join(parts)


def _check_hdu(packed: memoryview, out: Hdu, original: memoryview, src: Hdu | None) -> None:
    """One written HDU: its FITS checksum holds, and its data decode to the source's data."""
    where = f"written HDU {out.index}"
    if out.value("CHECKSUM") is not None:
        start = out.data_offset - padded(80 * (len(out.cards) + 1))
        end = out.data_offset + padded(out.data_size)
        if _rice.checksum(packed[start:end]) != 0xFFFFFFFF:
            raise CorruptFile(f"{where}: CHECKSUM does not match its bytes")
    if src is None:
        return
    expected = original[src.data_offset : src.data_offset + src.data_size]
    if is_rice_image(src):
        if not is_compressed_image(out):
            raise CorruptFile(f"{where}: expected a compressed image")
        got: bytes | memoryview = unpack_data(packed, out)
    else:
        got = packed[out.data_offset : out.data_offset + out.data_size]
    if not _rice.same_bytes(got, expected):
        raise CorruptFile(f"{where}: data differ from input HDU {src.index}")


def verify_plan(
    packed: memoryview, original: memoryview, original_hdus: list[Hdu]
) -> list[Callable[[], None]]:
    """Jobs that together prove ``packed`` (a written .fits.fz) restores ``original`` exactly:
    every HDU's checksum holds and its data decode to the input's data. CorruptFile if not."""
    out_hdus = parse_fits(packed)
    moved = is_rice_image(original_hdus[0])  # the primary image went to extension 1
    sources: list[Hdu | None] = [None] * moved + list(original_hdus)
    if len(out_hdus) != len(sources):
        raise CorruptFile(f"written file has {len(out_hdus)} HDUs, expected {len(sources)}")
    return [
        partial(_check_hdu, packed, out, original, src) for out, src in zip(out_hdus, sources, strict=True)
    ]
