"""What every sender checks before a CCD leaves the edge (direct upload and Kafka chunks alike).

Why here and not only at the data facility: the register function trusts a CCD's bytes when the
store's CRC32C equals the sender's ``obsingest-checksum`` and then reads only its primary header
(functions/register/verify.py). So the sender vouches for the structure of the bytes it
checksums, not only for the bytes.
"""

from __future__ import annotations

from obsingest.dataid import DataId
from obsingest.errors import CorruptFile
from obsingest.fits import primary_header


def check_ccd_bytes(data_id: DataId, data: bytes) -> None:
    """Every HDU of what is about to be sent is whole (a header walk: ~0.3 ms for a full CCD);
    CorruptFile naming the CCD otherwise, which the edge quarantines. What a sender sends goes
    out with its checksum as ``obsingest-checksum``, and the register function then reads only
    the primary header of it (functions/register/verify.py): a sender vouches for the structure
    of its bytes as well as for the bytes."""
    try:
        primary_header(data)  # every HDU walked (its errors: parse_fits's)
    except CorruptFile as exc:
        raise CorruptFile(f"CCD {data_id.key}: not sent: {exc}") from None
