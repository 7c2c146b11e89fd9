"""Object-finalize notifications: building them (local store) and parsing every shape they
arrive in (storage CloudEvent, Pub/Sub CloudEvent wrapping a GCS notification, Pub/Sub push JSON).

Parsing is pure: it turns a delivery into an ``ObjectEvent`` or raises BadMessage, so the register
function's transport layer stays thin and the logic is testable without services.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from obsingest.errors import BadMessage

if TYPE_CHECKING:
    from obsingest.store.base import StoredObject

STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
GCS_NOTIFICATION_FINALIZE = "OBJECT_FINALIZE"


class MetadataKeys:
    """Custom object metadata the producer sets; the register function reads it."""

    READOUT_TIME = "obsingest-readout-time"
    COMPRESSED_TIME = "obsingest-compressed-time"
    CHECKSUM = "obsingest-checksum"
    TRANSPORT = "obsingest-transport"
    PRODUCER = "obsingest-producer"
    QUARANTINE_REASON = "obsingest-quarantine-reason"
    QUARANTINE_ORIGINAL = "obsingest-quarantine-original"


def object_metadata(
    checksum: str, readout: datetime, compressed: datetime | None, transport: str, producer: str
) -> dict[str, str]:
    """Custom metadata every writer of a raw CCD sets (direct uploader, Kafka assembler): the
    stage timestamps and checksum the register function carries into the ArrivalEvent."""
    meta = {
        MetadataKeys.CHECKSUM: checksum,
        MetadataKeys.READOUT_TIME: readout.isoformat(),
        MetadataKeys.TRANSPORT: transport,
        MetadataKeys.PRODUCER: producer,
    }
    if compressed is not None:
        meta[MetadataKeys.COMPRESSED_TIME] = compressed.isoformat()
    return meta


def parked_copy(
    quarantine_prefix: str, name: str, checksum: str, meta: dict[str, str], reason: str
) -> tuple[str, dict[str, str]]:
    """Where and with what metadata refused bytes for ``name`` are parked (never overwriting
    the stored object); the register function files them in the registry's quarantine."""
    parked = f"{quarantine_prefix}{name}/{checksum.replace(':', '-')}.fits.fz"
    return parked, {
        **meta,
        MetadataKeys.QUARANTINE_REASON: reason,
        MetadataKeys.QUARANTINE_ORIGINAL: name,
    }


@dataclass(frozen=True)
class ObjectEvent:
    """One 'this object now exists' event, whatever envelope it came in."""

    event_id: str
    event_type: str  # OBJECT_FINALIZE or another GCS event type (ignored by the pipeline)
    obj: StoredObject

    @property
    def is_finalize(self) -> bool:
        return self.event_type == GCS_NOTIFICATION_FINALIZE


def object_resource(obj: StoredObject) -> dict[str, Any]:
    """GCS JSON API object resource (what notifications carry), string-typed like GCS's."""
    created = obj.time_created.isoformat().replace("+00:00", "Z")
    return {
        "kind": "storage#object",
        "id": f"{obj.bucket}/{obj.name}/{obj.generation}",
        "bucket": obj.bucket,
        "name": obj.name,
        "generation": str(obj.generation),
        "metageneration": "1",
        "contentType": "application/fits",
        "size": str(obj.size),
        "crc32c": obj.crc32c,
        "md5Hash": obj.md5_hash,
        "timeCreated": created,
        "updated": created,
        "metadata": dict(obj.metadata),
    }


def gcs_notification_message(obj: StoredObject) -> tuple[bytes, dict[str, str]]:
    """A Pub/Sub message exactly as a GCS notification config publishes it (JSON_API_V1)."""
    attributes = {
        "payloadFormat": "JSON_API_V1",
        "eventType": "OBJECT_FINALIZE",
        "bucketId": obj.bucket,
        "objectId": obj.name,
        "objectGeneration": str(obj.generation),
        "eventTime": obj.time_created.isoformat().replace("+00:00", "Z"),
        "notificationConfig": "injected",
    }
    return json.dumps(object_resource(obj)).encode(), attributes


def storage_cloudevent(obj: StoredObject) -> dict[str, Any]:
    """A structured-mode CloudEvent exactly as Eventarc delivers a GCS finalize."""
    return {
        "specversion": "1.0",
        "type": STORAGE_FINALIZED,
        "source": f"//storage.googleapis.com/projects/_/buckets/{obj.bucket}",
        "subject": f"objects/{obj.name}",
        "id": str(uuid.uuid4()),
        "time": obj.time_created.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": object_resource(obj),
    }


def parse_object_resource(data: dict[str, Any], event_id: str, event_type: str) -> ObjectEvent:
    from obsingest.store.base import StoredObject

    try:
        bucket, name = data["bucket"], data["name"]
        obj = StoredObject(
            bucket=bucket,
            name=name,
            size=int(data["size"]),
            crc32c=data.get("crc32c", ""),
            md5_hash=data.get("md5Hash", ""),
            generation=int(data.get("generation", 0)),
            time_created=_parse_time(data["timeCreated"]),
            metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
            uri=f"gs://{bucket}/{name}",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadMessage(f"event {event_id}: not a GCS object resource ({exc!r})") from exc
    return ObjectEvent(event_id=event_id, event_type=event_type, obj=obj)


def from_storage_cloudevent(attributes: dict[str, Any], data: Any) -> ObjectEvent:
    event_id = str(attributes.get("id", ""))
    if isinstance(data, (bytes, str)):
        data = _json(data, event_id)
    if not isinstance(data, dict):
        raise BadMessage(f"event {event_id}: storage CloudEvent without an object resource")
    return parse_object_resource(data, event_id, GCS_NOTIFICATION_FINALIZE)


def from_pubsub_message(message: dict[str, Any]) -> ObjectEvent:
    """A GCS notification as a Pub/Sub message ({data: base64 JSON, attributes: {...}})."""
    attributes = message.get("attributes") or {}
    event_id = str(message.get("messageId") or message.get("message_id") or "")
    event_type = attributes.get("eventType", "")
    if not event_type:
        raise BadMessage(f"message {event_id}: no eventType attribute (not a GCS notification)")
    raw = message.get("data", "")
    try:
        payload = base64.b64decode(raw, validate=True) if isinstance(raw, str) else raw
    except binascii.Error as exc:
        raise BadMessage(f"message {event_id}: data is not base64") from exc
    return parse_object_resource(_json(payload, event_id), event_id, event_type)


def from_pubsub_cloudevent(data: Any) -> ObjectEvent:
    if isinstance(data, (bytes, str)):
        data = _json(data, "pubsub-cloudevent")
    if not isinstance(data, dict) or "message" not in data:
        raise BadMessage("Pub/Sub CloudEvent without a message")
    return from_pubsub_message(data["message"])


def from_push_envelope(body: Any) -> ObjectEvent:
    """Pub/Sub push JSON: {"message": {...}, "subscription": "..."}."""
    if isinstance(body, (bytes, str)):
        body = _json(body, "push")
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        raise BadMessage("push request is not a Pub/Sub envelope")
    return from_pubsub_message(body["message"])


def parse_cloudevent(event_type: str, attributes: dict[str, Any], data: Any) -> ObjectEvent:
    if event_type == STORAGE_FINALIZED:
        return from_storage_cloudevent(attributes, data)
    if event_type == PUBSUB_PUBLISHED:
        return from_pubsub_cloudevent(data)
    raise BadMessage(
        f"event {attributes.get('id', '')}: unsupported CloudEvent type {event_type!r}"
    )


def _json(raw: bytes | str, event_id: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadMessage(f"event {event_id}: payload is not JSON") from exc


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
