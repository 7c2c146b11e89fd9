"""The functions-framework entry points, through the framework's own WSGI app."""

import base64
import json
from pathlib import Path

import pytest
from functions_framework import create_app

from functions.register import main, wiring
from obsingest.messages import utcnow
from obsingest.notifications import object_resource
from producers.uploader import DirectUploader

from .conftest import small_ccd

pytestmark = pytest.mark.unit

SOURCE = str(Path(main.__file__))


@pytest.fixture
def wired(env):
    wiring.configure(env.service)
    yield env
    wiring.configure(None)


def _push_body(obj):
    data = base64.b64encode(json.dumps(object_resource(obj)).encode()).decode()
    attrs = {"eventType": "OBJECT_FINALIZE", "bucketId": obj.bucket, "objectId": obj.name}
    return {"message": {"data": data, "attributes": attrs, "messageId": "42"}, "subscription": "s"}


def test_push_endpoint_registers_and_acks(wired, did):
    obj = DirectUploader(wired.store).send(did, small_ccd(did.exposure, did.detector), utcnow()).obj
    client = create_app("on_push", SOURCE, "http").test_client()
    response = client.post("/", json=_push_body(obj))
    assert response.status_code == 200 and b"registered" in response.data
    assert wired.registry.count_datasets() == 1


def test_push_endpoint_answers_5xx_on_retriable_failure(wired, did, monkeypatch):
    from obsingest.registry import RegistryUnavailable

    obj = DirectUploader(wired.store).send(did, small_ccd(did.exposure, did.detector), utcnow()).obj

    def down(*a, **k):
        raise RegistryUnavailable("connection slots exhausted")

    monkeypatch.setattr(wired.registry, "register", down)
    client = create_app("on_push", SOURCE, "http").test_client()
    assert client.post("/", json=_push_body(obj)).status_code == 503


def test_undecodable_push_is_quarantined_and_acked(wired):
    client = create_app("on_push", SOURCE, "http").test_client()
    response = client.post("/", json={"message": {"data": "!!", "messageId": "7"}})
    assert response.status_code == 200
    [row] = wired.registry.quarantined()
    assert row["object_uri"] == "pubsub:7" and row["reason"] == "bad-message"


def test_push_auth_refuses_unauthenticated_and_bad_tokens(wired, monkeypatch):
    monkeypatch.setenv("OBSINGEST_FUNCTION_PUSH_AUTH", "true")
    monkeypatch.setenv("OBSINGEST_FUNCTION_PUSH_AUDIENCE", "https://register.example")
    client = create_app("on_push", SOURCE, "http").test_client()
    assert client.post("/", json={}).status_code == 401
    bad = client.post("/", json={}, headers={"Authorization": "Bearer not-a-jwt"})
    assert bad.status_code == 403
    assert wired.registry.quarantined() == []


def test_cloudevent_entry_point(wired, did):
    DirectUploader(wired.store).send(did, small_ccd(did.exposure, did.detector), utcnow())
    [(_, event)] = wired.store.outbox().pending()
    client = create_app("on_object_finalized", SOURCE, "cloudevent").test_client()
    response = client.post(
        "/", json=event, headers={"Content-Type": "application/cloudevents+json"}
    )
    assert response.status_code == 200
    assert wired.registry.count_datasets() == 1


def test_push_auth_without_an_audience_is_a_configuration_error(monkeypatch):
    from pydantic import ValidationError

    from obsingest.settings import FunctionSettings

    monkeypatch.setenv("OBSINGEST_FUNCTION_PUSH_AUTH", "true")
    with pytest.raises(ValidationError, match="PUSH_AUDIENCE"):
        FunctionSettings()
