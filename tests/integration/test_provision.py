"""Provisioning against the Pub/Sub emulator: what the repair (``setup``) finds is made whole."""

from __future__ import annotations

import pytest

from infra.local.provision import EVENTS_DLQ_TOPIC, setup, subscribe
from obsingest.bus.pubsub import topic_path
from obsingest.bus.pull import PubSubPullSource, subscription_path
from obsingest.settings import BusSettings, hold_subscription
from obsingest_cli.main import build_parser
from tests.integration.fixtures.handles import GcsService, PubSubService, unique_name

pytestmark = pytest.mark.integration


def _pull_one(project: str, subscription: str) -> list[bytes]:
    source = PubSubPullSource(project, subscription)
    try:
        return [d.data for d in source.pull(10, 10.0)]
    finally:
        source.close()


def test_setup_makes_the_streaming_summarys_dead_letter_topic_and_keeps_what_lands_there(
    pubsub: PubSubService, gcs: GcsService
) -> None:
    """``obsingest summarize --streaming`` sends undecodable inputs to exposure-events-dlq by
    default; terraform makes it, local setup did not: the local job's first bad message had no
    topic to go to. Now setup makes it, with the hold subscription that keeps its messages."""
    assert build_parser(("summarize",)).parse_args(["summarize"]).dead_letter_topic == EVENTS_DLQ_TOPIC
    project, bucket = unique_name("setup"), unique_name("setup")
    gcs.buckets.append(bucket)
    setup(bucket, BusSettings(pubsub_project=project), storage_client=gcs.client())
    topic = topic_path(project, EVENTS_DLQ_TOPIC)
    pubsub.publisher().publish(topic, b"undecodable", dlq_reason="bad").result(timeout=10)
    hold = subscription_path(project, hold_subscription(EVENTS_DLQ_TOPIC))
    assert _pull_one(project, hold) == [b"undecodable"]


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
    assert _pull_one(pubsub.project_id, path) == [b"after the repair"]
