"""``SubscriberThread`` on a real Pub/Sub emulator that restarts."""

from __future__ import annotations

import threading
import time

import pytest

from obsingest.bus.pull import Delivery, SubscriberThread
from tests.integration.fixtures.private_stack import PrivateStack

pytestmark = pytest.mark.integration


def test_a_subscriber_goes_on_after_the_emulator_restarted() -> None:
    """A restarted emulator has forgotten every topic and subscription: the subscriber's pulls
    failed (NOT_FOUND) for good, and the demo's arrivals, the tests' observers and the
    benchmarks heard nothing more. It now makes the topic and its subscription again."""
    from google.api_core import exceptions as api_exceptions
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    stack = PrivateStack(["pubsub"]).up()
    subscriber = None
    try:
        with stack.use():
            project = stack.settings.pubsub_project_id
            topic, path = f"projects/{project}/topics/t", f"projects/{project}/subscriptions/s"
            publisher, client = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
            publisher.create_topic(request={"name": topic})
            client.create_subscription(request={"name": path, "topic": topic, "ack_deadline_seconds": 10})
            received: list[bytes] = []
            heard = threading.Event()

            def callback(delivery: Delivery) -> None:
                received.append(delivery.data)
                heard.set()

            subscriber = SubscriberThread(project, "s", callback).start()
            publisher.publish(topic, b"before").result(timeout=30)
            assert heard.wait(30)
            heard.clear()

            stack.restart("pubsub")
            deadline = time.monotonic() + 60
            while True:  # until the subscriber has made its subscription again
                try:
                    client.get_subscription(request={"subscription": path}, timeout=5)
                    break
                except api_exceptions.NotFound:
                    assert time.monotonic() < deadline, "the subscription was not made again"
                    time.sleep(0.2)
            publisher.publish(topic, b"after").result(timeout=30)
            assert heard.wait(30)
            assert received == [b"before", b"after"]
    finally:
        if subscriber is not None:
            subscriber.stop()
        stack.down()
