"""Object-finalize notifications: building them (local store) and parsing every shape they
arrive in (storage CloudEvent, Pub/Sub CloudEvent wrapping a GCS notification, Pub/Sub push JSON).

Parsing is pure: it turns a delivery into an ``ObjectEvent`` or raises BadMessage, so the register
function's transport layer stays thin and the logic is testable without services.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from obsingest.errors import BadMessage
from obsingest.timescales import parse_utc

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
    return parked, {**meta, MetadataKeys.QUARANTINE_REASON: reason, MetadataKeys.QUARANTINE_ORIGINAL: name}


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


def stored_from_resource(resource: dict[str, Any], bucket: str, uri: str | None = None) -> StoredObject:
    """A JSON object resource (``object_resource``'s, or a trusted store's) as a ``StoredObject``."""
    from obsingest.store.base import StoredObject

    created = str(resource.get("timeCreated") or "")
    try:
        when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        when = datetime.now(UTC)
    return StoredObject(
        bucket=bucket,
        name=str(resource.get("name", "")),
        size=int(resource.get("size") or 0),
        crc32c=str(resource.get("crc32c") or ""),
        md5_hash=str(resource.get("md5Hash") or ""),
        generation=int(resource.get("generation") or 0),
        time_created=when if when.tzinfo else when.replace(tzinfo=UTC),
        metadata={str(k): str(v) for k, v in (resource.get("metadata") or {}).items()},
        uri=uri or f"gs://{bucket}/{resource.get('name', '')}",
    )


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


def parse_object_resource(data: Any, event_id: str, event_type: str) -> ObjectEvent:
    """The GCS object resource of a notification, every field checked (untrusted input): a
    BadMessage naming the field and why, never an AttributeError further down the line."""
    from obsingest.store.base import StoredObject

    where = f"event {clip(event_id)}"
    if not isinstance(data, dict):
        raise BadMessage(f"{where}: payload is {_kind(data)}, not a GCS object resource")
    bucket = _bucket(data, where)
    name = _object_name(data, where)
    obj = StoredObject(
        bucket=bucket,
        name=name,
        size=_int64(data, "size", where, required=True),
        crc32c=_digest(data, "crc32c", 4, where),
        md5_hash=_digest(data, "md5Hash", None, where),
        generation=_int64(data, "generation", where, required=False),
        time_created=_time(data, "timeCreated", where),
        metadata=_metadata(data.get("metadata"), where),
        uri=f"gs://{bucket}/{name}",
    )
    return ObjectEvent(event_id=event_id, event_type=event_type, obj=obj)


def from_storage_cloudevent(attributes: dict[str, Any], data: Any) -> ObjectEvent:
    event_id = _event_id(attributes.get("id", ""))
    if isinstance(data, (bytes, str)):
        data = _json(data, event_id)
    return parse_object_resource(data, event_id, GCS_NOTIFICATION_FINALIZE)


def from_pubsub_message(message: Any) -> ObjectEvent:
    """A GCS notification as a Pub/Sub message ({data: base64 JSON, attributes: {...}})."""
    if not isinstance(message, dict):
        raise BadMessage(f"Pub/Sub message is {_kind(message)}, not an object")
    event_id = message_id(message)
    where = f"message {clip(event_id)}"
    attributes = message.get("attributes")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise BadMessage(f"{where}: attributes is {_kind(attributes)}, not an object")
    event_type = attributes.get("eventType", "")
    if not event_type:
        raise BadMessage(f"{where}: no eventType attribute (not a GCS notification)")
    if not isinstance(event_type, str) or len(event_type) > 64:
        raise BadMessage(f"{where}: eventType {clip(event_type)} is not a GCS event type")
    raw = message.get("data", "")
    if not isinstance(raw, str):
        raise BadMessage(f"{where}: data is {_kind(raw)}, not a base64 string")
    try:
        payload = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: non-ASCII characters
        raise BadMessage(f"{where}: data is not base64 ({exc})") from None
    return parse_object_resource(_json(payload, event_id), event_id, event_type)


def from_push_envelope(body: Any, label: str = "push", refusal: str = "") -> ObjectEvent:
    """Pub/Sub push JSON, {"message": {...}, "subscription": "..."}, or a Pub/Sub CloudEvent's
    data, {"message": {...}} (``label`` and ``refusal`` name which in errors)."""
    if isinstance(body, (bytes, str)):
        body = _json(body, label)
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        raise BadMessage(refusal or "push request is not a Pub/Sub envelope")
    return from_pubsub_message(body["message"])


def parse_cloudevent(event_type: str, attributes: dict[str, Any], data: Any) -> ObjectEvent:
    if event_type == STORAGE_FINALIZED:
        return from_storage_cloudevent(attributes, data)
    if event_type == PUBSUB_PUBLISHED:
        return from_push_envelope(data, "pubsub-cloudevent", "Pub/Sub CloudEvent without a message")
    raise BadMessage(
        f"event {clip(attributes.get('id', ''))}: unsupported CloudEvent type {clip(event_type)}"
    )


def message_id(message: Any) -> str:
    """The Pub/Sub message id of a (possibly malformed) message, '' when it has none."""
    if not isinstance(message, dict):
        return ""
    return _event_id(message.get("messageId") or message.get("message_id") or "")


# -- field checks ------------------------------------------------------------------------------
#: Deeper than any notification nests (an object resource is 3 levels inside its envelopes).
MAX_JSON_DEPTH = 32
#: GCS's own limits: object names are 1..1024 bytes of UTF-8 without CR/LF; bucket names <= 222.
MAX_OBJECT_NAME_BYTES = 1024
MAX_BUCKET_NAME = 222
_INT64_MAX = 2**63 - 1
#: what makes a str not Unicode text: a lone surrogate (JSON can escape one), UTF-8 cannot encode it
_SURROGATE = re.compile("[\ud800-\udfff]")
#: JSON strings, skipped whole (even an unterminated one, which runs to the end): a possessive
#: loop, so every byte is looked at once whatever the quotes and backslashes.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.?)*+(?:"|\Z)', re.DOTALL)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def json_nesting_exceeds(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``raw`` nests deeper than ``limit``, decided before json.loads recurses.
    Linear and in C: strings removed, brackets kept, innermost ``[]`` pairs removed ``limit``
    times; a pair still there was deeper."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        reduced = brackets.replace(b"[]", b"")
        if reduced == brackets:
            break
        brackets = reduced
    # a surviving pair, or a run of unclosed openers the parser would descend into
    return b"[]" in brackets or brackets.count(b"[") > limit


def clip(value: Any, limit: int = 120) -> str:
    """``repr`` of an untrusted value for an error message, at most ``limit`` characters."""
    text = repr(value) if isinstance(value, str) else f"<{_kind(value)}>"
    return text if len(text) <= limit else f"{text[: limit - 20]}...' ({len(value)} chars)"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    name = type(value).__name__
    name = {"dict": "object", "list": "array", "str": "string"}.get(name, name)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _event_id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return ""
    return str(value)[:256]


def _bucket(data: dict[str, Any], where: str) -> str:
    bucket = data.get("bucket")
    if not isinstance(bucket, str) or not bucket:
        raise BadMessage(f"{where}: field 'bucket' is {_kind(bucket)}, not a bucket name")
    if len(bucket) > MAX_BUCKET_NAME or _SURROGATE.search(bucket) or not bucket.isprintable():
        raise BadMessage(f"{where}: bucket {clip(bucket)} is not a bucket name")
    return bucket


def _object_name(data: dict[str, Any], where: str) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise BadMessage(f"{where}: field 'name' is {_kind(name)}, not an object name")
    if _SURROGATE.search(name):
        raise BadMessage(f"{where}: object name {clip(name)} is not valid Unicode")
    size = len(name.encode("utf-8"))
    if size > MAX_OBJECT_NAME_BYTES:
        raise BadMessage(
            f"{where}: object name {clip(name)} is {size} bytes, over GCS's "
            f"{MAX_OBJECT_NAME_BYTES}-byte limit"
        )
    if "\r" in name or "\n" in name:
        raise BadMessage(f"{where}: object name {clip(name)} contains a line break")
    return name


def _int64(data: dict[str, Any], key: str, where: str, required: bool) -> int:
    """GCS sends int64 fields as decimal strings; plain integers are accepted too."""
    value = data.get(key)
    if value is None and not required:
        return 0
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadMessage(f"{where}: field {key!r} is {clip(value)}, not a non-negative integer")
    if not 0 <= value <= _INT64_MAX:
        raise BadMessage(f"{where}: field {key!r} = {value} is out of range 0..2^63-1")
    return value


def _digest(data: dict[str, Any], key: str, size: int | None, where: str) -> str:
    """A base64 digest field; ``size`` bytes exactly when the value is used (crc32c), else only
    short printable ASCII (md5Hash is carried to the registry, never compared)."""
    value = data.get(key)
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > 64 or not (value.isascii() and value.isprintable()):
        raise BadMessage(f"{where}: field {key!r} is {clip(value)}, not a base64 digest")
    if size is None:
        return value
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise BadMessage(f"{where}: field {key!r} = {clip(value)} is not {size} bytes of base64")
    return value


def _time(data: dict[str, Any], key: str, where: str) -> datetime:
    value = data.get(key)
    if not isinstance(value, str):
        raise BadMessage(f"{where}: field {key!r} is {_kind(value)}, not an RFC 3339 time")
    try:
        return parse_utc(value)  # no offset: taken as UTC
    except ValueError:
        raise BadMessage(f"{where}: field {key!r} = {clip(value)} is not an RFC 3339 time") from None


def _metadata(value: Any, where: str) -> dict[str, str]:
    """Custom metadata: GCS's is a map of strings to strings."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadMessage(f"{where}: field 'metadata' is {_kind(value)}, not an object")
    for key, item in value.items():
        if not isinstance(item, str):
            raise BadMessage(f"{where}: metadata {clip(key)} is {_kind(item)}, not a string")
        if _SURROGATE.search(key) or _SURROGATE.search(item):
            raise BadMessage(f"{where}: metadata {clip(key)} is not valid Unicode")
    return dict(value)


def _json(raw: bytes | str, event_id: str) -> Any:
    if json_nesting_exceeds(raw):
        raise BadMessage(f"event {clip(event_id)}: payload JSON nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadMessage(f"event {clip(event_id)}: payload is not JSON ({exc})") from None
