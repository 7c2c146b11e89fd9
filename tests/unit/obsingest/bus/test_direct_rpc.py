"""DirectRpcs: a gRPC error becomes the API's exception; one the generated method would retry is
made again through it (the fallback), any other is raised."""

from __future__ import annotations

import grpc
import pytest
from google.api_core import exceptions as api_exceptions

from obsingest.bus.direct_rpc import DirectRpcs, message_types

pytestmark = pytest.mark.unit


class RpcError(grpc.RpcError):
    """What a gRPC call raises: a code and details (grpc.RpcError's informative form)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return str(self._code)

    def trailing_metadata(self) -> tuple[()]:
        return ()


def _failing(status: str):
    def rpc(request: object, timeout: float) -> None:
        raise RpcError(getattr(grpc.StatusCode, status))

    return rpc


@pytest.mark.parametrize(
    ("status", "retried", "falls_back"),
    [
        ("UNAVAILABLE", (), True),
        ("INTERNAL", (), True),
        ("NOT_FOUND", (), False),
        ("DEADLINE_EXCEEDED", (), False),
        ("DEADLINE_EXCEEDED", (api_exceptions.DeadlineExceeded,), True),
        ("RESOURCE_EXHAUSTED", (api_exceptions.ResourceExhausted,), True),
    ],
)
def test_only_what_the_generated_method_retries_goes_through_it(status, retried, falls_back):
    rpcs = DirectRpcs(channel=None)
    rpcs._rpcs["acknowledge"] = _failing(status)
    generated: list[str] = []
    request = {"subscription": "projects/p/subscriptions/s", "ack_ids": ["a1"]}
    if falls_back:
        answer = rpcs.call("acknowledge", request, 1.0, lambda: generated.append("again") or "ok", retried)
        assert (answer, generated) == ("ok", ["again"])
    else:
        with pytest.raises(api_exceptions.GoogleAPIError) as caught:
            rpcs.call("acknowledge", request, 1.0, lambda: generated.append("again"), retried)
        assert caught.value.grpc_status_code == getattr(grpc.StatusCode, status)
        assert generated == []


def test_the_request_is_the_raw_protobuf_of_its_fields():
    asked = []
    rpcs = DirectRpcs(channel=None)
    rpcs._rpcs["publish"] = lambda request, timeout: asked.append((request, timeout)) or "answer"
    fields = {"topic": "projects/p/topics/t", "messages": [{"data": b"x", "attributes": {"k": "v"}}]}
    assert rpcs.call("publish", fields, 2.5, lambda: pytest.fail("no fallback")) == "answer"
    request_type, response_type = message_types("publish")
    assert asked == [(request_type(**fields), 2.5)]
    assert asked[0][0].messages[0].attributes["k"] == "v"
    assert response_type.DESCRIPTOR.full_name == "google.pubsub.v1.PublishResponse"


def test_each_rpc_is_made_once_on_the_channel():
    made = []

    class Channel:
        def unary_unary(self, path, request_serializer, response_deserializer):
            made.append(path)
            return lambda request, timeout: path

    rpcs = DirectRpcs(Channel())
    for _ in range(3):
        rpcs.call("pull", {"subscription": "s", "max_messages": 1}, 1.0, lambda: None)
    rpcs.call("acknowledge", {"subscription": "s", "ack_ids": ["a"]}, 1.0, lambda: None)
    assert made == ["/google.pubsub.v1.Subscriber/Pull", "/google.pubsub.v1.Subscriber/Acknowledge"]
