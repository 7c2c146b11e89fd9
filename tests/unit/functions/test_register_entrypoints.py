"""The functions-framework entry points, through the framework's own WSGI app."""

import base64
import json
from pathlib import Path

import pytest
from functions_framework import create_app

from functions.register import main, wiring
from obsingest.messages import utcnow
from obsingest.store.notifications import object_resource
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
    response = client.post("/", json=event, headers={"Content-Type": "application/cloudevents+json"})
    assert response.status_code == 200
    assert wired.registry.count_datasets() == 1


def test_push_auth_without_an_audience_is_a_configuration_error(monkeypatch):
    from pydantic import ValidationError

    from obsingest.settings import FunctionSettings

    monkeypatch.setenv("OBSINGEST_FUNCTION_PUSH_AUTH", "true")
    with pytest.raises(ValidationError, match="PUSH_AUDIENCE"):
        FunctionSettings()


def _jwt(claims: dict) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2ln"


class _Request:
    def __init__(self, token: str) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}


AUDIENCE = "obsingest-register"
PUSHER = "push@example.iam.gserviceaccount.com"


def _settings():
    from obsingest.settings import FunctionSettings

    return FunctionSettings(push_auth=True, push_audience=AUDIENCE, push_service_account=PUSHER)


def test_push_auth_decisions_without_the_network(monkeypatch):
    """Each branch of the token check, with Google's verification replaced."""
    from google.auth.exceptions import TransportError
    from google.oauth2 import id_token

    from functions.register.auth import verify_push_request

    def fetched(claims=None, error=None):
        def verify(token, request, audience):
            assert audience == AUDIENCE
            if error:
                raise error
            return claims

        return verify

    wrong_audience = _Request(_jwt({"aud": "someone-else", "email": PUSHER}))
    assert verify_push_request(wrong_audience, _settings())[1] == 403
    good = _Request(_jwt({"aud": AUDIENCE, "email": PUSHER}))
    monkeypatch.setattr(id_token, "verify_oauth2_token", fetched(error=TransportError("dns")))
    assert verify_push_request(good, _settings())[1] == 503
    monkeypatch.setattr(id_token, "verify_oauth2_token", fetched(error=ValueError("bad sig")))
    assert verify_push_request(good, _settings())[1] == 403
    other = {"aud": AUDIENCE, "email": "intruder@example.com", "email_verified": True}
    monkeypatch.setattr(id_token, "verify_oauth2_token", fetched(claims=other))
    assert verify_push_request(good, _settings())[1] == 403
    ours = {"aud": AUDIENCE, "email": PUSHER, "email_verified": True}
    monkeypatch.setattr(id_token, "verify_oauth2_token", fetched(claims=ours))
    assert verify_push_request(good, _settings()) is None
