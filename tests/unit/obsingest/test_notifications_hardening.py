"""The notification parser on hostile input: every delivery is an ObjectEvent whose fields have
the types the service relies on, or a BadMessage naming what is wrong. Nothing else.

Property-based (Hypothesis): random JSON values, and valid notifications with one field replaced,
removed or made absurd, in every envelope the parser accepts.
"""

import base64
import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsingest.errors import BadMessage
from obsingest.store import notifications as n
from obsingest.store.base import StoredObject

pytestmark = pytest.mark.unit

OBJ = StoredObject(
    "bucket",
    "raw/LSSTComCam/20261122/2026112200001/LSSTComCam_2026112200001_003.fits.fz",
    10,
    "AAAAAA==",
    "",
    17,
    datetime(2026, 11, 22, tzinfo=UTC),
    {"obsingest-transport": "direct"},
)
RESOURCE = n.object_resource(OBJ)
FIELDS = sorted(RESOURCE)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
#: text a database or a file system chokes on: NUL, lone surrogates, line breaks, very long
hostile_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.sampled_from(["\x00", "\ud800", "\udfff", "\n", "\r", "é", "/", "a"])),
    st.integers(min_value=1025, max_value=4000).map(lambda k: "raw/" + "x" * k),
    st.just("\x00"),
    st.just(""),
)


def _b64(value) -> str:
    return base64.b64encode(json.dumps(value).encode("utf-8", "surrogatepass")).decode()


def _message(resource, event_type="OBJECT_FINALIZE", message_id="m-1"):
    return {"data": _b64(resource), "attributes": {"eventType": event_type}, "messageId": message_id}


def assert_well_typed(event: n.ObjectEvent) -> None:
    """What the register service relies on of a parsed event."""
    obj = event.obj
    assert isinstance(event.event_id, str) and isinstance(event.event_type, str)
    assert isinstance(obj.bucket, str) and obj.bucket
    assert isinstance(obj.name, str) and obj.name and "\n" not in obj.name
    assert len(obj.name.encode("utf-8")) <= n.MAX_OBJECT_NAME_BYTES
    assert isinstance(obj.size, int) and not isinstance(obj.size, bool) and 0 <= obj.size < 2**63
    assert isinstance(obj.generation, int) and 0 <= obj.generation < 2**63
    assert isinstance(obj.crc32c, str) and isinstance(obj.md5_hash, str)
    assert obj.time_created.tzinfo is not None
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in obj.metadata.items())


def parses_or_refuses(parse, *args) -> None:
    try:
        event = parse(*args)
    except BadMessage as exc:
        assert str(exc) and exc.reason == "bad-message" and not exc.retriable
    else:
        assert_well_typed(event)


@PROPERTY
@given(json_values)
def test_any_json_as_a_push_body_parses_or_is_refused(body):
    parses_or_refuses(n.from_push_envelope, body)
    parses_or_refuses(n.from_push_envelope, json.dumps(body))
    parses_or_refuses(n.from_pubsub_message, body)
    parses_or_refuses(n.from_push_envelope, {"message": {**_message(RESOURCE), "data": body}})
    parses_or_refuses(n.from_push_envelope, {"message": _message(body)})


@PROPERTY
@given(st.sampled_from(FIELDS), json_values | hostile_text, st.booleans())
def test_one_field_replaced_or_removed_parses_or_is_refused(field, value, remove):
    resource = dict(RESOURCE)
    if remove:
        resource.pop(field)
    else:
        resource[field] = value
    parses_or_refuses(n.from_pubsub_message, _message(resource))
    ce = {"id": "e-1", "type": n.STORAGE_FINALIZED}
    parses_or_refuses(n.parse_cloudevent, n.STORAGE_FINALIZED, ce, resource)
    parses_or_refuses(n.parse_cloudevent, n.PUBSUB_PUBLISHED, ce, {"message": _message(resource)})


@PROPERTY
@given(st.sampled_from(["data", "attributes", "messageId", "eventType"]), json_values | hostile_text)
def test_envelope_fields_of_any_type_parse_or_are_refused(field, value):
    message = _message(RESOURCE)
    if field == "eventType":
        message["attributes"] = {"eventType": value}
    else:
        message[field] = value
    parses_or_refuses(n.from_push_envelope, {"message": message, "subscription": "s"})


@PROPERTY
@given(hostile_text)
def test_hostile_object_names_parse_or_are_refused_with_the_reason(name):
    try:
        event = n.from_pubsub_message(_message({**RESOURCE, "name": name}))
    except BadMessage as exc:
        assert "name" in str(exc)
    else:
        assert event.obj.name == json.loads(json.dumps(name))  # JSON pairs up surrogates
        assert_well_typed(event)


@PROPERTY
@given(st.binary(max_size=300), st.text(max_size=300))
def test_random_bytes_and_text_as_payloads_parse_or_are_refused(raw, text):
    for payload in (raw, text):
        parses_or_refuses(n.parse_cloudevent, n.STORAGE_FINALIZED, {"id": "x"}, payload)
        parses_or_refuses(n.parse_cloudevent, n.PUBSUB_PUBLISHED, {"id": "x"}, payload)
        parses_or_refuses(n.from_push_envelope, payload)
    message = {"data": base64.b64encode(raw).decode(), "attributes": {"eventType": "X"}}
    parses_or_refuses(n.from_pubsub_message, message)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("size", [1], "'size' is <an array>"),
        ("size", "-1", "'size'"),
        ("size", str(2**63), "'size'"),
        ("size", True, "'size'"),
        ("generation", {"a": 1}, "'generation'"),
        ("name", 5, "'name' is an int"),
        ("name", "", "'name'"),
        ("name", "raw/" + "x" * 1100, "over GCS's 1024-byte limit"),
        ("name", "raw/a\nb", "line break"),
        ("name", "raw/\ud800", "not valid Unicode"),
        ("bucket", None, "'bucket' is null"),
        ("timeCreated", 1700000000, "'timeCreated' is an int"),
        ("timeCreated", "yesterday", "'timeCreated'"),
        ("timeCreated", "0001-01-01T00:00+14:00", "'timeCreated'"),  # no UTC instant: was a 500
        ("metadata", ["a"], "'metadata' is an array"),
        ("metadata", {"k": {"nested": 1}}, "metadata 'k' is an object"),
        ("crc32c", "!!!", "'crc32c'"),
        ("crc32c", "AAAA", "not 4 bytes"),
        ("md5Hash", 12, "'md5Hash'"),
    ],
)
def test_wrong_fields_name_the_field_and_the_reason(field, value, says):
    with pytest.raises(BadMessage, match="event 'm-1'") as info:
        n.from_pubsub_message(_message({**RESOURCE, field: value}))
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ([1, 2], "message is an array"),
        ({"attributes": [1]}, "attributes is an array"),
        ({"attributes": {"eventType": 7}}, "not a GCS event type"),
        ({"attributes": {"eventType": "OBJECT_FINALIZE"}, "data": 12}, "data is an int"),
        ({"attributes": {"eventType": "OBJECT_FINALIZE"}, "data": "é"}, "not base64"),
        ({"attributes": {"eventType": "OBJECT_FINALIZE"}, "data": "bm90IGpzb24="}, "not JSON"),
    ],
)
def test_malformed_messages_are_refused_with_the_reason(message, says):
    with pytest.raises(BadMessage, match=says):
        n.from_pubsub_message(message)


def test_a_time_without_offset_is_utc_and_int64_strings_are_accepted():
    event = n.from_pubsub_message(
        _message({**RESOURCE, "timeCreated": "2026-11-22T00:00:00", "size": "12", "generation": 3})
    )
    assert event.obj.time_created == datetime(2026, 11, 22, tzinfo=UTC)
    assert (event.obj.size, event.obj.generation) == (12, 3)


def test_deeply_nested_payloads_are_refused_before_parsing():
    deep = "[" * 100_000 + "]" * 100_000
    message = {"data": base64.b64encode(deep.encode()).decode(), "attributes": {"eventType": "X"}}
    with pytest.raises(BadMessage, match="nests deeper than 32 levels"):
        n.from_pubsub_message(message)
    with pytest.raises(BadMessage, match="nests deeper"):
        n.from_push_envelope("[" * 100_000)


@pytest.mark.parametrize(
    ("raw", "deep"),
    [
        ('{"a": 1}', False),
        ('{"a":' * 32 + "1" + "}" * 32, False),
        ('{"a":' * 33 + "1" + "}" * 33, True),
        ("[" * 100_000, True),  # unclosed: the parser would still descend
        ('"' + "[" * 1000 + '"', False),  # brackets inside a string
        ('["\\"' + "[" * 40 + '"]', False),  # an escaped quote does not end the string
        ('"\\' + '\\"' * 1000 + "[" * 40, False),  # unterminated string swallows the rest
        ("[[]," * 10 + "[]]" * 10, False),
        ("[" + "[]," * 100_000 + "[]]", False),  # wide, not deep
    ],
)
def test_json_nesting_is_measured_outside_strings(raw, deep):
    assert n.json_nesting_exceeds(raw) is deep
    assert n.json_nesting_exceeds(raw.encode()) is deep


@PROPERTY
@given(st.integers(min_value=0, max_value=80), st.sampled_from(["[", '{"k":']))
def test_json_nesting_agrees_with_the_structure(depth, opener):
    closer = "]" if opener == "[" else "}"
    raw = opener * depth + "0" + closer * depth
    assert n.json_nesting_exceeds(raw) is (depth > n.MAX_JSON_DEPTH)
    if depth <= n.MAX_JSON_DEPTH:
        json.loads(raw)


def test_clip_bounds_untrusted_values_in_messages():
    assert n.clip("x" * 10_000).endswith("(10000 chars)") and len(n.clip("x" * 10_000)) < 150
    assert n.clip([1, 2]) == "<an array>"
