"""Provisioning against the Pub/Sub emulator: what the repair (``setup``) finds is made whole."""

from __future__ import annotations

import socket

import pytest

from infra.local import provision
from infra.local.provision import setup, subscribe
from obsingest.bus.pubsub import topic_path
from obsingest.bus.pull import PubSubPullSource, subscription_path
from obsingest.defaults import EVENTS_DLQ_TOPIC
from obsingest.errors import ServiceUnavailable
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


@pytest.mark.parametrize("silent", ["gcs", "kafka"])
def test_setup_names_the_service_that_does_not_answer_in_one_error(
    pubsub: PubSubService, gcs: GcsService, silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GCS (or Kafka) that takes the connection and never answers: setup waited a minute (its
    client's timeout; half a minute for Kafka's topics) and died with a bare ReadTimeout (or
    TimeoutError) traceback. Now each call is bounded (ADMIN_TIMEOUT, 1 s here) and the error
    is one ServiceUnavailable naming the service and its address (``obsingest setup``: one
    line, exit 1)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    monkeypatch.setattr(provision, "ADMIN_TIMEOUT", 1.0)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # never accepted, never answered
        address = f"127.0.0.1:{server.getsockname()[1]}"
        store, kafka, where = gcs.client(), None, f"Kafka is not reachable at {address}"
        if silent == "gcs":
            options = {"api_endpoint": f"http://{address}"}
            store = storage.Client("p", credentials=AnonymousCredentials(), client_options=options)
            where = f"GCS at http://{address} did not answer"
        else:
            kafka = address
        bucket = unique_name("setup")
        gcs.buckets.append(bucket)
        with pytest.raises(ServiceUnavailable, match=where):
            setup(
                bucket,
                BusSettings(pubsub_project=unique_name("setup")),
                storage_client=store,
                kafka_bootstrap=kafka,
            )
