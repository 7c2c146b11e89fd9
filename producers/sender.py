"""The edge's one verb: send a compressed CCD towards the data facility, through
``producers.uploader.DirectUploader`` (object store) or ``producers.kafka`` (chunks), as
``open_sender`` picks from a URL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

from obsingest.dataid import DataId

#: stored now | the same bytes were there | other bytes were there (direct); acked (kafka)
SendStatus = Literal["stored", "exists", "conflict", "acked"]


class SendResult(Protocol):
    @property
    def status(self) -> SendStatus: ...
    @property
    def checksum(self) -> str: ...

    @property
    def object_name(self) -> str: ...


class Sender(Protocol):
    def send(
        self, data_id: DataId, data: bytes, readout_time: datetime, compressed_time: datetime | None = None
    ) -> SendResult: ...


def open_sender(url: str, prefix: str, quarantine_prefix: str, producer: str) -> Sender:
    """``file://DIR`` or ``gs://BUCKET`` (direct upload), ``kafka://HOST:PORT/TOPIC`` (chunks)."""
    if url.startswith(("file://", "gs://")):
        from obsingest.settings import StoreSettings
        from obsingest.store import open_store
        from producers.uploader import DirectUploader

        store = open_store(StoreSettings(url=url, prefix=prefix, quarantine_prefix=quarantine_prefix))
        return DirectUploader(store, prefix, quarantine_prefix, producer=producer)
    if url.startswith("kafka://"):
        from producers.kafka import open_kafka_sender

        return open_kafka_sender(url, producer=producer)
    raise ValueError(f"unsupported destination {url!r} (file://, gs://, kafka://)")
