"""Provisioning against the Pub/Sub emulator: what the repair (``setup``) finds is made whole."""

from __future__ import annotations

import pytest

from infra.local.provision import subscribe
from obsingest.bus.pull import PubSubPullSource
from tests.integration.fixtures.handles import PubSubService, unique_name

pytestmark = pytest.mark.integration


def test_a_subscription_its_deleted_topic_left_detached_is_made_again(pubsub: PubSubService) -> None:
    """A deleted topic's subscriptions are detached for good (their topic becomes
    ``_deleted-topic_``): the topic made again, the repair's ``subscribe`` found the relay's
    subscription 'existing' and kept it, receiving nothing, at every repair."""
    topic = pubsub.new_topic("objects")
    topic_id = topic.rsplit("/", 1)[1]
    name = unique_name("relay")
    path = subscribe(pubsub.project_id, topic_id, name)
    pubsub.subscriptions.append(path)
    publisher = pubsub.publisher()
    publisher.delete_topic(request={"topic": topic})
    publisher.create_topic(request={"name": topic})
    assert subscribe(pubsub.project_id, topic_id, name) == path  # the repair
    publisher.publish(topic, b"after the repair").result(timeout=10)
    source = PubSubPullSource(pubsub.project_id, path)
    try:
        got = source.pull(10, 10.0)
    finally:
        source.close()
    assert [d.data for d in got] == [b"after the repair"]
