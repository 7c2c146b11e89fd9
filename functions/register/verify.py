"""What the register function reads of a stored CCD. One whose producer's ``obsingest-checksum``
equals the store's CRC32C is the producer's bytes: only its primary header is read (one ranged
GET). Otherwise it is read whole, its CRC32C computed and every HDU checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsingest.checksums import checksum_from_crc32c_b64, crc32c_b64
from obsingest.errors import ChecksumMismatch, CorruptFile
from obsingest.fits import Hdu, parse_primary, primary_header
from obsingest.store.base import ObjectStore, StoredObject
from obsingest.store.notifications import MetadataKeys

#: read of a vouched-for CCD: its primary header with room to spare (a longer one is read whole)
HEAD_BYTES = 64 * 1024
#: a raw CCD is tens of MB: a larger object is no CCD, refused before a whole read takes it into memory
MAX_OBJECT_BYTES = 1 << 30


@dataclass(frozen=True)
class Verified:
    primary: Hdu  # its primary header
    size: int
    checksum: str  # ``crc32c:xxxxxxxx``


def read_verified(store: ObjectStore, obj: StoredObject) -> Verified:
    """The CCD's primary header, size and checksum; ChecksumMismatch or CorruptFile otherwise."""
    claimed = obj.metadata.get(MetadataKeys.CHECKSUM, "")
    if claimed and obj.crc32c and obj.size > 0 and claimed == _checksum(obj.crc32c):
        head = store.read_head(obj.name, HEAD_BYTES)
        if (head.generation, head.crc32c) != (obj.generation, obj.crc32c):
            raise ChecksumMismatch(
                f"object {obj.name!r}: generation {head.generation} (crc32c {head.crc32c}) is "
                f"stored, not {obj.generation} (crc32c {obj.crc32c}) that the event names; "
                "replaced since"
            )
        try:
            return Verified(parse_primary(head.data), obj.size, claimed)
        except CorruptFile as exc:
            if len(head.data) >= obj.size:
                raise CorruptFile(f"object {obj.name!r}: {exc}") from None
            # a header longer than HEAD_BYTES (or bytes the producer got wrong): read it all
    return _read_whole(store, obj, claimed)


def _read_whole(store: ObjectStore, obj: StoredObject, claimed: str) -> Verified:
    if obj.size > MAX_OBJECT_BYTES:
        raise CorruptFile(
            f"object {obj.name!r}: {obj.size} bytes, more than any CCD (at most {MAX_OBJECT_BYTES}); not read"
        )
    data = store.read(obj.name)
    actual_crc = crc32c_b64(data)
    if len(data) != obj.size or (obj.crc32c and actual_crc != obj.crc32c):
        raise ChecksumMismatch(
            f"object {obj.name!r}: stored bytes ({len(data)} B, crc32c {actual_crc}) differ "
            f"from the event ({obj.size} B, crc32c {obj.crc32c}); replaced or corrupted"
        )
    checksum = checksum_from_crc32c_b64(actual_crc)  # the same CRC, not a second pass
    if claimed and claimed != checksum:
        raise ChecksumMismatch(f"object {obj.name!r}: producer checksum {claimed} != stored {checksum}")
    try:
        primary = primary_header(data)  # every HDU checked, only the primary kept
    except CorruptFile as exc:
        raise CorruptFile(f"object {obj.name!r}: {exc}") from None
    return Verified(primary, len(data), checksum)


def _checksum(crc32c: str) -> str:
    try:
        return checksum_from_crc32c_b64(crc32c)
    except ValueError:  # not GCS's base64 of 4 bytes: the whole read names the mismatch
        return ""
