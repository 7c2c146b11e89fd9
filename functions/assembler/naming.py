"""An assembled CCD's object name: the camera's file name in Rubin's layout, from its own primary
header (the chunks' data id does not always give the observation id's controller letter).
"""

from __future__ import annotations

from obsingest.dataid import DataId, identity_from_header
from obsingest.errors import ObsIngestError
from obsingest.fits import parse_primary


def assembled_object_name(data_id: DataId, data: bytes, prefix: str) -> str:
    """``{prefix}{instrument}/{day_obs}/{obs_id}/{obs_id}_{raft}_{sensor}.fits`` from the header
    of ``data``; one giving no identity, or another CCD's, gets the data id's own name (the
    register function quarantines it)."""
    try:
        identity = identity_from_header(parse_primary(data).str_value, data_id.key)
    except ObsIngestError:
        return data_id.object_name(prefix)
    if identity.data_id != data_id:
        return data_id.object_name(prefix)
    return identity.object_name(prefix)
