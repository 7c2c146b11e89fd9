"""What every sender checks before a CCD leaves the edge, and which name it goes under.

The register function trusts bytes whose CRC32C is the sender's ``obsingest-checksum`` and reads
only their primary header (functions/register/verify.py), so the sender vouches for their
structure. The name comes from the header's identity cards: the data id alone does not always
recover the observation id's controller letter.
"""

from __future__ import annotations

from obsingest.dataid import DataId, Identity, identity_from_header
from obsingest.errors import CorruptFile, HeaderMismatch
from obsingest.fits import primary_header


def check_ccd_bytes(data_id: DataId, data: bytes) -> Identity:
    """The CCD's identity, read from the header of what is about to be sent: CorruptFile unless
    every HDU is whole, NoIdentity or HeaderMismatch unless the primary header says ``data_id``."""
    try:
        primary = primary_header(data)  # every HDU walked (its errors: parse_fits's)
    except CorruptFile as exc:
        raise CorruptFile(f"CCD {data_id.key}: not sent: {exc}") from None
    identity = identity_from_header(primary.str_value, f"CCD {data_id.key}: not sent")
    if identity.data_id != data_id:
        raise HeaderMismatch(
            f"CCD {data_id.key}: not sent: its header says {identity.data_id.key} "
            f"({identity.obs_id} {identity.raft}_{identity.sensor})"
        )
    return identity
