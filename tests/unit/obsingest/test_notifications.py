import base64
import json
from datetime import UTC, datetime

import pytest

from obsingest.errors import BadMessage
from obsingest.store import notifications as n
from obsingest.store.base import StoredObject

pytestmark = pytest.mark.unit

OBJ = StoredObject(
    "bucket",
    "raw/x.fits.fz",
    10,
    "AAAAAA==",
    "md5==",
    17,
    datetime(2026, 11, 22, tzinfo=UTC),
    {"obsingest-transport": "kafka"},
)


def _gcs_message(event_type="OBJECT_FINALIZE"):
    return {
        "data": base64.b64encode(json.dumps(n.object_resource(OBJ)).encode()).decode(),
        "attributes": {"eventType": event_type, "bucketId": "bucket", "objectId": OBJ.name},
        "messageId": "m-1",
    }


def _same(event: n.ObjectEvent):
    obj = event.obj
    assert (obj.bucket, obj.name, obj.size, obj.generation) == ("bucket", OBJ.name, 10, 17)
    assert obj.metadata == OBJ.metadata and obj.crc32c == OBJ.crc32c
    assert obj.time_created == OBJ.time_created


def test_storage_cloudevent_round_trip():
    ce = n.storage_cloudevent(OBJ)
    event = n.parse_cloudevent(ce["type"], {"id": ce["id"]}, ce["data"])
    assert event.is_finalize
    _same(event)


def test_pubsub_cloudevent_and_push_envelope():
    message = _gcs_message()
    _same(n.parse_cloudevent(n.PUBSUB_PUBLISHED, {"id": "1"}, {"message": message}))
    push = n.from_push_envelope(json.dumps({"message": message, "subscription": "s"}))
    assert push.event_id == "m-1"
    _same(push)


def test_other_gcs_event_types_are_recognised_not_finalize():
    assert not n.from_pubsub_message(_gcs_message("OBJECT_DELETE")).is_finalize


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        {"nomessage": 1},
        {"message": {"data": "!!!", "attributes": {"eventType": "OBJECT_FINALIZE"}}},
        {"message": {"data": base64.b64encode(b"{}").decode(), "attributes": {"eventType": "X"}}},
        {"message": {"data": "", "attributes": {}}},
    ],
)
def test_malformed_push_bodies_raise_bad_message(body):
    with pytest.raises(BadMessage):
        n.from_push_envelope(body)


def test_unknown_cloudevent_type():
    with pytest.raises(BadMessage, match="unsupported CloudEvent type"):
        n.parse_cloudevent("com.example.other", {"id": "9"}, {})
