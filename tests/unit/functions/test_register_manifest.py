"""The register function's ``on_manifest`` (Pub/Sub push of the ``exposures`` topic), through
the functions-framework app it is deployed in: a manifest recorded once, a redelivery
acknowledged, a conflicting or undecodable one quarantined with its reason and acknowledged,
a request that is no delivery refused 4xx, the registry down answered 503."""

import base64
from datetime import UTC, datetime
from pathlib import Path

import pytest
from functions_framework import create_app

from functions.register import main, wiring
from obsingest.errors import RetriableError
from obsingest.messages import ExposureManifest

pytestmark = pytest.mark.unit

SOURCE = str(Path(main.__file__))
E = 2026112200001


@pytest.fixture
def client(env):
    wiring.configure(env.service)
    yield create_app("on_manifest", SOURCE, "http").test_client()
    wiring.configure(None)


def manifest(detectors=(0, 1, 2), flt="r_03", instrument="LSSTComCam") -> bytes:
    t = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    return ExposureManifest(instrument, E, 20261122, list(detectors), t, 15.0, flt, t).encode()


def push(client, data: bytes, message_id: str = "m1"):
    envelope = {
        "message": {"data": base64.b64encode(data).decode(), "messageId": message_id},
        "subscription": "projects/p/subscriptions/exposures-register",
    }
    return client.post("/", json=envelope)


def _manifests(env):
    from sqlalchemy import select

    from obsingest.registry import tables

    with env.registry.engine.connect() as conn:
        return conn.execute(select(tables.exposure_manifest)).mappings().all()


def test_a_manifest_is_recorded_and_its_redelivery_acknowledged(client, env):
    first = push(client, manifest())
    assert first.status_code == 200 and first.data.startswith(b"recorded manifest LSSTComCam/")
    again = push(client, manifest(), message_id="m2")
    assert again.status_code == 200 and again.data.startswith(b"duplicate manifest")
    (row,) = _manifests(env)
    assert row["detectors"] == "0,1,2" and row["expected"] == 3
    assert env.registry.quarantined() == []


def test_a_conflicting_manifest_is_quarantined_and_the_first_kept(client, env):
    push(client, manifest())
    reply = push(client, manifest(detectors=range(9), flt="g_01"), message_id="m2")
    assert reply.status_code == 200 and b"quarantined: manifest-conflict" in reply.data
    assert [r["expected"] for r in _manifests(env)] == [3]
    (q,) = env.registry.quarantined()
    assert q["reason"] == "manifest-conflict" and q["object_uri"] == f"manifest/LSSTComCam/{E}"


@pytest.mark.parametrize(
    ("data", "reason", "source"),
    [
        (b"not avro at all", "bad-message", "pubsub:m9"),
        (manifest()[:12], "bad-message", "pubsub:m9"),
        (manifest(instrument="HSC"), "unknown-instrument", f"manifest/HSC/{E}"),
        (manifest(detectors=(0, 42)), "bad-manifest", f"manifest/LSSTComCam/{E}"),
    ],
)
def test_what_is_no_manifest_is_quarantined_with_its_reason(client, env, data, reason, source):
    reply = push(client, data, message_id="m9")
    assert reply.status_code == 200 and f"quarantined: {reason}".encode() in reply.data
    (q,) = env.registry.quarantined()
    assert (q["reason"], q["object_uri"]) == (reason, source)
    assert _manifests(env) == []


def test_not_base64_is_quarantined_and_no_envelope_refused(client, env):
    bad = client.post("/", json={"message": {"data": "@@@", "messageId": "m3"}})
    assert bad.status_code == 200 and b"bad-message" in bad.data
    assert client.post("/", json={"hello": 1}).status_code == 400
    assert client.post("/", data=b"[1,2]", content_type="application/json").status_code == 400
    assert client.get("/").status_code == 405
    assert [q["reason"] for q in env.registry.quarantined()] == ["bad-message"]


def test_a_registry_that_is_down_is_answered_503_for_redelivery(client, env, monkeypatch):
    def down(*_a, **_k):
        raise RetriableError("registry unavailable after 5 attempts")

    monkeypatch.setattr(env.registry, "_retrying", down)
    reply = push(client, manifest())
    assert reply.status_code == 503 and reply.headers["Retry-After"]
