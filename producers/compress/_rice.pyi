"""Types of the C extension ``_rice.c`` (RICE_1 coder/decoder and FITS checksum), which mypy
cannot read from the built module."""

from typing_extensions import Buffer

def compress_be32(pixels: Buffer, blocksize: int = 32, /) -> bytes: ...
def compress_be16(pixels: Buffer, blocksize: int = 32, /) -> bytes: ...
def pack_image(
    data: Buffer,
    offset: int,
    bytepix: int,
    ncols: int,
    nrows: int,
    tile_cols: int,
    tile_rows: int,
    blocksize: int = 32,
    /,
) -> tuple[bytes, bytes, int]: ...
def unpack_image(
    data: Buffer,
    table_offset: int,
    row_bytes: int,
    heap_offset: int,
    heap_size: int,
    bytepix: int,
    ncols: int,
    nrows: int,
    tile_cols: int,
    tile_rows: int,
    blocksize: int = 32,
    /,
) -> bytes: ...
def checksum(data: Buffer, start: int = 0, /) -> int: ...
def same_bytes(a: Buffer, b: Buffer, /) -> bool: ...
