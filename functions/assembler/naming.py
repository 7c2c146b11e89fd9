"""Which object an assembled CCD is stored as: the camera's file name in Rubin's layout, read
from the assembled file's own primary header.

The chunks carry the data id, not the observation id, whose controller letter the exposure id
does not always give (O and C share one counter since 2023-10-05); the header does, as it did to
the edge's sender (``producers.ccd_bytes``).
"""

from __future__ import annotations

from obsingest.dataid import DataId, identity_from_header
from obsingest.errors import ObsIngestError
from obsingest.fits import parse_primary


def assembled_object_name(data_id: DataId, data: bytes, prefix: str) -> str:
    """``{prefix}{instrument}/{day_obs}/{obs_id}/{obs_id}_{raft}_{sensor}.fits`` from the
    header of ``data`` (only its first blocks are read). A header that gives no identity, or
    another CCD's, gets the data id's own name instead: the file is stored all the same and the
    register function, the one place that judges files, quarantines it with the reason."""
    try:
        identity = identity_from_header(parse_primary(data).str_value, data_id.key)
    except ObsIngestError:
        return data_id.object_name(prefix)
    if identity.data_id != data_id:
        return data_id.object_name(prefix)
    return identity.object_name(prefix)
