"""PubSubPublisher on the direct Publish RPC: the message id on success; a failure the generated
method retries goes through it; a deadline or a refusal is a PublishFailed (retriable) naming
the topic. (Against the emulator: tests/integration/test_publishers.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import grpc
import pytest

from obsingest.bus.direct_rpc import DirectRpcs
from obsingest.bus.pubsub import PublishFailed, PubSubPublisher
from tests.unit.obsingest.bus.test_direct_rpc import RpcError

pytestmark = pytest.mark.unit


class GeneratedApi:
    """The generated client's ``publish``: what it was asked, and its answer."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def publish(self, **kwargs: object) -> SimpleNamespace:
        self.calls.append(kwargs)
        return SimpleNamespace(message_ids=["from-generated"])


def _publisher(rpc) -> tuple[PubSubPublisher, GeneratedApi]:
    api = GeneratedApi()
    publisher = PubSubPublisher("p", timeout=5.0, client=SimpleNamespace(api=api))
    publisher._direct = DirectRpcs(channel=None)  # the RPC itself, as without an injected client
    publisher._direct._rpcs["publish"] = rpc
    return publisher, api


def test_the_direct_rpc_answers_the_message_id_with_the_key_as_an_attribute():
    asked = []

    def rpc(request, timeout):
        asked.append((request, timeout))
        return SimpleNamespace(message_ids=["m1"])

    publisher, api = _publisher(rpc)
    assert publisher.publish("arrivals", b"{}", key="k", attributes={"n": 1}) == "m1"
    [(request, timeout)] = asked
    assert (request.topic, timeout, api.calls) == ("projects/p/topics/arrivals", 5.0, [])
    assert dict(request.messages[0].attributes) == {"n": "1", "key": "k"}
    assert request.messages[0].data == b"{}"


@pytest.mark.parametrize("status", ["UNAVAILABLE", "CANCELLED", "RESOURCE_EXHAUSTED"])
def test_what_the_generated_method_retries_is_published_again_through_it(status):
    def rpc(request, timeout):
        raise RpcError(getattr(grpc.StatusCode, status))

    publisher, api = _publisher(rpc)
    assert publisher.publish("arrivals", b"{}") == "from-generated"
    [call] = api.calls
    assert call["topic"] == "projects/p/topics/arrivals" and call["retry"] is publisher._retry
    assert 0 < call["timeout"] <= 5.0  # what is left of the publish's timeout


@pytest.mark.parametrize(
    ("status", "says"), [("DEADLINE_EXCEEDED", "no confirmation in 5.0 s"), ("NOT_FOUND", "404")]
)
def test_a_deadline_or_a_refusal_is_a_retriable_publish_failure(status, says):
    def rpc(request, timeout):
        raise RpcError(getattr(grpc.StatusCode, status))

    publisher, api = _publisher(rpc)
    with pytest.raises(PublishFailed) as caught:
        publisher.publish("arrivals", b"{}")
    assert "projects/p/topics/arrivals" in str(caught.value) and says in str(caught.value)
    assert caught.value.retriable and api.calls == []
