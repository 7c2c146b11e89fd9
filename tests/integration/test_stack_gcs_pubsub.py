"""GCS + Pub/Sub for real: an upload under raw/ yields an OBJECT_FINALIZE notification."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.fixtures.handles import GcsService, PubSubService

pytestmark = pytest.mark.integration


def _pull(pubsub: PubSubService, subscription: str, wait: float) -> list:
    """Pull until at least one message arrives or ``wait`` seconds pass; ack what we got."""
    subscriber = pubsub.subscriber()
    deadline = time.monotonic() + wait
    while True:
        resp = subscriber.pull(request={"subscription": subscription, "max_messages": 10}, timeout=10)
        if resp.received_messages:
            subscriber.acknowledge(
                request={"subscription": subscription, "ack_ids": [m.ack_id for m in resp.received_messages]}
            )
            return [m.message for m in resp.received_messages]
        if time.monotonic() > deadline:
            return []
        time.sleep(0.2)


def test_upload_under_raw_publishes_object_finalize(gcs: GcsService, pubsub: PubSubService) -> None:
    from google.cloud.storage.notification import JSON_API_V1_PAYLOAD_FORMAT, OBJECT_FINALIZE_EVENT_TYPE

    # The topic must exist before the notification config: fake-gcs-server (like GCS) publishes
    # only to an existing topic.
    topic = pubsub.new_topic("gcs-events")
    subscription = pubsub.new_subscription(topic, "gcs-events")
    bucket_name = gcs.new_bucket("raw-ccds")
    client = gcs.client()
    bucket = client.bucket(bucket_name)
    notification = bucket.notification(
        topic_name=topic.rsplit("/", 1)[1],
        topic_project=pubsub.project_id,
        event_types=[OBJECT_FINALIZE_EVENT_TYPE],
        payload_format=JSON_API_V1_PAYLOAD_FORMAT,
        blob_name_prefix="raw/",
    )
    notification.create()
    assert notification.notification_id

    outside = bucket.blob("other/ignored.txt")
    outside.upload_from_string(b"not under raw/")

    data = b"fits-bytes" * 1000
    name = "raw/LSSTCam/20250612/2025061200001/raw_LSSTCam_2025061200001_042.fits.fz"
    blob = bucket.blob(name)
    blob.metadata = {"detector": "42", "checksum": "crc32c:abcd"}
    blob.upload_from_string(data, content_type="application/fits")

    messages = _pull(pubsub, subscription, wait=15)
    assert len(messages) == 1, [m.attributes for m in messages]
    msg = messages[0]
    attrs = dict(msg.attributes)
    assert attrs["eventType"] == "OBJECT_FINALIZE"
    assert attrs["bucketId"] == bucket_name
    assert attrs["objectId"] == name
    assert attrs.get("payloadFormat") == "JSON_API_V1"

    payload = json.loads(msg.data)
    assert payload["name"] == name
    assert payload["bucket"] == bucket_name
    assert int(payload["size"]) == len(data)
    assert payload["metadata"] == {"detector": "42", "checksum": "crc32c:abcd"}

    # the object outside raw/ produced nothing
    assert _pull(pubsub, subscription, wait=2) == []


def test_buckets_are_fresh_per_call(gcs: GcsService) -> None:
    a, b = gcs.new_bucket("ns"), gcs.new_bucket("ns")
    assert a != b
    names = {bk.name for bk in gcs.client().list_buckets()}
    assert {a, b} <= names
    assert list(gcs.client().bucket(a).list_blobs()) == []


def test_pubsub_carries_messages_above_four_mib(pubsub: PubSubService) -> None:
    """The pstest server accepts real Pub/Sub's 10 MB, not gRPC's 4 MiB default."""
    topic = pubsub.new_topic("big")
    subscription = pubsub.new_subscription(topic, "big")
    data = b"x" * (5 * 1024 * 1024)
    # The Python client in emulator mode cannot *receive* more than 4 MiB per pull, so the
    # accepted publish (a 4 MiB server would answer RESOURCE_EXHAUSTED) is the proof.
    message_id = pubsub.publisher().publish(topic, data).result(timeout=30)
    assert message_id
    assert subscription


def test_the_gcs_emulator_does_not_log_every_request() -> None:
    """The stack's fake-gcs-server logged one line per request at its 'info' level, appended to
    <run_dir>/logs/gcs.log for good: ~250 bytes a request, several a CCD, hundreds of MB a
    night. Requests leave the log as it was; start-up and errors still go there."""
    import requests

    from tests.integration.fixtures.private_stack import PrivateStack

    stack = PrivateStack(["gcs"]).up()
    try:
        gcs = stack.stack.service("gcs")
        before = gcs.log_path.stat().st_size
        endpoint = f"http://{stack.settings.host}:{stack.settings.gcs_port}"
        for _ in range(20):
            requests.get(f"{endpoint}/storage/v1/b", params={"project": "p"}, timeout=5).raise_for_status()
        assert gcs.log_path.stat().st_size == before, gcs.log_tail(5)
    finally:
        stack.down()
