"""Direct upload of a compressed CCD to the object store (DESIGN.md transport (a)), create-once:
a retry after a lost acknowledgement finds its own bytes and succeeds; different bytes under the
name are parked under the quarantine prefix with the reason in their metadata, for an operator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from obsingest import defaults
from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import ChecksumConflict
from obsingest.logs import get_logger, log_event
from obsingest.store.base import ObjectConflict, ObjectStore, StoredObject
from obsingest.store.notifications import MetadataKeys, object_metadata, parked_copy
from producers.ccd_bytes import check_ccd_bytes

log = get_logger("obsingest.producer.upload")


@dataclass(frozen=True)
class UploadResult:
    status: Literal["stored", "exists", "conflict"]  # producers.sender.SendStatus, direct
    obj: StoredObject
    checksum: str

    @property
    def object_name(self) -> str:
        return self.obj.name


@dataclass
class DirectUploader:
    store: ObjectStore
    prefix: str = defaults.RAW_PREFIX
    quarantine_prefix: str = defaults.QUARANTINE_PREFIX
    producer: str = "edge"
    transport: str = "direct"

    def send(
        self, data_id: DataId, data: bytes, readout_time: datetime, compressed_time: datetime | None = None
    ) -> UploadResult:
        name = check_ccd_bytes(data_id, data).object_name(self.prefix)
        checksum = checksum_str(data)
        meta = object_metadata(checksum, readout_time, compressed_time, self.transport, self.producer)
        try:
            result = self.store.put(name, data, meta)
        except ObjectConflict as conflict:
            return self._park_conflict(data_id, name, data, meta, conflict)
        status: Literal["stored", "exists"] = "stored" if result.created else "exists"
        log_event(log, f"upload.{status}", data_id=data_id.key, object=name, size=len(data))
        return UploadResult(status, result.obj, checksum)

    def _park_conflict(
        self, data_id: DataId, name: str, data: bytes, meta: dict[str, str], conflict: ChecksumConflict
    ) -> UploadResult:
        checksum = meta[MetadataKeys.CHECKSUM]
        parked, parked_meta = parked_copy(self.quarantine_prefix, name, checksum, meta, conflict.reason)
        result = self.store.put(parked, data, parked_meta)
        log_event(
            log,
            "upload.conflict",
            logging.ERROR,
            data_id=data_id.key,
            object=name,
            parked=parked,
            error=str(conflict),
        )
        return UploadResult("conflict", result.obj, checksum)
