"""The register function on hostile input, property-based (Hypothesis).

Random and mutated CloudEvents, push envelopes and object names go to the real RegisterService
(SQLite registry, local store) and through the functions-framework Flask app of both entry
points. Each must end in a handled outcome (registered, duplicate, quarantined with a recorded
reason, ignored), a 4xx for a request that is not a delivery, or a retriable error answered 503
with Retry-After: never a 500, never a quarantined outcome without its record, and the one good
CCD in the store registered at most once.
"""

import base64
import json
from pathlib import Path

import pytest
from functions_framework import create_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.register import main, wiring
from obsingest.dataid import DataId
from obsingest.errors import BadMessage, RetriableError
from obsingest.messages import utcnow
from obsingest.registry.db_errors import storable
from obsingest.store import notifications as n
from producers.uploader import DirectUploader

from .conftest import Env, small_ccd

pytestmark = pytest.mark.unit

SOURCE = str(Path(main.__file__))
HANDLED = {"registered", "duplicate", "quarantined", "ignored"}
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
segment = st.text(alphabet=st.sampled_from("abLSTCm0123456789_.-/\x00é\ud800"), max_size=24)
object_names = st.one_of(
    st.text(max_size=80),
    st.builds(lambda prefix, rest: prefix + rest, st.sampled_from(["raw/", "quarantine/", "x/"]), segment),
    st.integers(min_value=900, max_value=3000).map(lambda k: "quarantine/" + "q" * k),
    st.sampled_from(
        [
            "raw/LSSTComCam/20261122/2026112200001/LSSTComCam_2026112200001_003.fits.fz",
            "raw/LSSTComCam/20261122/2026112200001/LSSTComCam_2026112200001_003.fits.fz\x00",
            "raw/LSSTComCam/20261122/2026112200001/LSSTComCam_2026112200001_099.fits.fz",
            "raw/Nonesuch/20261122/2026112200001/Nonesuch_2026112200001_000.fits.fz",
            "raw/../../etc/passwd",
        ]
    ),
)
metadata_values = st.one_of(
    st.text(max_size=40), st.integers(min_value=65, max_value=600).map(lambda k: "r" * k)
)
metadata = st.dictionaries(
    st.sampled_from(
        [
            n.MetadataKeys.TRANSPORT,
            n.MetadataKeys.READOUT_TIME,
            n.MetadataKeys.CHECKSUM,
            n.MetadataKeys.QUARANTINE_REASON,
            n.MetadataKeys.QUARANTINE_ORIGINAL,
            "other",
        ]
    ),
    metadata_values,
    max_size=3,
)


@pytest.fixture
def stored(tmp_path):
    """An Env with one good CCD in the store (not yet registered) and its object resource."""
    env = Env(tmp_path)
    did = DataId("LSSTComCam", 2026112200001, 3)
    obj = DirectUploader(env.store).send(did, small_ccd(did.exposure, did.detector), utcnow()).obj
    env.store.outbox().pending()  # the staged event is not needed: the tests build their own
    wiring.configure(env.service)
    yield env, n.object_resource(obj)
    wiring.configure(None)
    env.registry.close()


@st.composite
def mutated_resources(draw, base):
    resource = dict(base)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        field = draw(st.sampled_from([*sorted(base), "name", "name", "metadata"]))
        choice = draw(st.integers(min_value=0, max_value=3))
        if choice == 0:
            resource.pop(field, None)
        elif field == "name":
            resource["name"] = draw(object_names)
        elif field == "metadata":
            resource["metadata"] = {**base["metadata"], **draw(metadata)}
        else:
            resource[field] = draw(json_values)
    return resource


def _b64(value) -> str:
    return base64.b64encode(json.dumps(value).encode("utf-8", "surrogatepass")).decode()


def assert_recorded(env, outcome) -> None:
    """A quarantined outcome has its record, with its reason."""
    assert outcome.status in HANDLED, outcome
    if outcome.status == "quarantined":
        assert outcome.reason
        reasons = {row["reason"] for row in env.registry.quarantined()}
        assert storable(outcome.reason, 64) in reasons
    assert env.registry.count_datasets() <= 1


def test_service_handles_mutated_events_or_raises_retriable(stored):
    env, base = stored

    @PROPERTY
    @given(st.data())
    def run(data):
        resource = data.draw(mutated_resources(base))
        event_type = data.draw(st.sampled_from(["OBJECT_FINALIZE", "OBJECT_DELETE", "X"]))
        message = {"data": _b64(resource), "attributes": {"eventType": event_type}}
        try:
            parsed = n.from_pubsub_message({**message, "messageId": "m"})
        except BadMessage as exc:
            outcome = env.service.quarantine_message("pubsub:m", exc)
        else:
            try:
                outcome = env.service.handle(parsed)
            except RetriableError:
                return
        assert_recorded(env, outcome)

    run()


def test_the_good_ccd_among_mutations_is_registered_exactly_once(stored):
    env, base = stored
    event = n.from_pubsub_message({"data": _b64(base), "attributes": {"eventType": "OBJECT_FINALIZE"}})
    assert env.service.handle(event).status == "registered"
    assert env.service.handle(event).status == "duplicate"
    assert env.registry.count_datasets() == 1


def _push_app():
    return create_app("on_push", SOURCE, "http").test_client()


def _cloudevent_app():
    return create_app("on_object_finalized", SOURCE, "cloudevent").test_client()


def assert_answered(env, response) -> None:
    status, text = response.status_code, response.get_data(as_text=True)
    assert status != 500 and status < 600, text
    assert status in {200, 400, 405, 413, 415, 503}, (status, text)
    if status == 503:
        assert response.headers.get("Retry-After")
    if status == 200 and text not in ("OK", ""):
        assert text.split(" ")[0].rstrip(":") in HANDLED, text
    assert env.registry.count_datasets() <= 1


def test_push_endpoint_answers_every_body_without_500(stored):
    env, base = stored
    client = _push_app()

    @PROPERTY
    @given(st.data())
    def run(data):
        kind = data.draw(st.integers(min_value=0, max_value=4))
        if kind == 0:
            body = json.dumps(data.draw(json_values))
        elif kind == 1:
            body = data.draw(st.binary(max_size=200))
        else:
            message = {
                "data": _b64(data.draw(mutated_resources(base))),
                "attributes": {"eventType": "OBJECT_FINALIZE"},
                "messageId": data.draw(st.text(max_size=10) | json_values),
            }
            if kind == 3:
                message[data.draw(st.sampled_from(sorted(message)))] = data.draw(json_values)
            envelope = {"message": message, "subscription": "s"}
            if kind == 4:
                envelope = {data.draw(st.sampled_from(["message", "x"])): data.draw(json_values)}
            body = json.dumps(envelope)
        response = client.post("/", data=body, content_type="application/json")
        assert_answered(env, response)
        if response.status_code == 200 and response.get_data(as_text=True).startswith("quar"):
            assert env.registry.quarantined()

    run()


def test_cloudevent_endpoint_answers_every_event_without_500(stored):
    env, base = stored
    client = _cloudevent_app()
    types = [n.STORAGE_FINALIZED, n.PUBSUB_PUBLISHED, "com.example.other"]

    @PROPERTY
    @given(st.data())
    def run(data):
        event_type = data.draw(st.sampled_from(types) | st.text(max_size=10))
        resource = data.draw(mutated_resources(base))
        payload = (
            {"message": {"data": _b64(resource), "attributes": {"eventType": "OBJECT_FINALIZE"}}}
            if event_type == n.PUBSUB_PUBLISHED
            else resource
        )
        event = {
            "specversion": "1.0",
            "id": data.draw(st.text(min_size=1, max_size=10)),
            "source": "//storage.googleapis.com/projects/_/buckets/local",
            "type": event_type,
            "data": payload,
        }
        for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
            event[data.draw(st.sampled_from(sorted(event)))] = data.draw(json_values)
        if data.draw(st.booleans()):  # structured mode
            response = client.post(
                "/", data=json.dumps(event), headers={"Content-Type": "application/cloudevents+json"}
            )
        else:  # binary mode: attributes in headers, data as the body
            headers = {f"ce-{k}": str(v) for k, v in event.items() if k != "data" and isinstance(v, str)}
            headers = {k: v for k, v in headers.items() if v.isprintable() and v.isascii()}
            body = data.draw(st.binary(max_size=100)) if data.draw(st.booleans()) else json.dumps(payload)
            response = client.post("/", data=body, headers={**headers, "Content-Type": "application/json"})
        assert_answered(env, response)

    run()


def test_retriable_failures_are_503_with_retry_after_on_both_entry_points(stored, monkeypatch):
    from obsingest.registry import RegistryUnavailable

    env, base = stored

    def down(*a, **k):
        raise RegistryUnavailable("connection refused")

    monkeypatch.setattr(env.registry, "register", down)
    monkeypatch.setattr(env.registry, "quarantine", down)
    good = {"data": _b64(base), "attributes": {"eventType": "OBJECT_FINALIZE"}, "messageId": "1"}
    bad = {"data": "!!", "attributes": {"eventType": "OBJECT_FINALIZE"}, "messageId": "2"}
    for message in (good, bad):
        response = _push_app().post("/", json={"message": message})
        assert response.status_code == 503 and response.headers["Retry-After"] == "10"
        assert b"registry-unavailable" in response.data
    ce = n.storage_cloudevent(n.parse_object_resource(base, "e", "OBJECT_FINALIZE").obj)
    response = _cloudevent_app().post(
        "/", data=json.dumps(ce), headers={"Content-Type": "application/cloudevents+json"}
    )
    assert response.status_code == 503 and response.headers["Retry-After"] == "10"


def test_push_without_a_message_id_is_quarantined_under_a_digest(stored):
    env, _ = stored
    client = _push_app()
    for data in ("!!", "??"):
        message = {"data": data, "attributes": {"eventType": "OBJECT_FINALIZE"}}
        assert client.post("/", json={"message": message}).status_code == 200
    uris = sorted(row["object_uri"] for row in env.registry.quarantined())
    assert len(uris) == 2 and all(u.startswith("pubsub:sha256-") for u in uris)


def test_in_process_delivery_still_gets_body_and_status(stored):
    """The relay's in-process target calls on_push directly and unpacks (body, status)."""
    from infra.local.relay.push import InProcessTarget

    env, base = stored
    target = InProcessTarget(main.on_push)
    good = {"data": _b64(base), "attributes": {"eventType": "OBJECT_FINALIZE"}, "messageId": "1"}
    assert target.push({"message": good}).status == 200
    assert target.push({"nope": 1}).status == 400
    assert env.registry.count_datasets() == 1
