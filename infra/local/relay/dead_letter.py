"""Where the relay puts messages it gave up on: the dead-letter topic, reason in attributes."""

from __future__ import annotations

import logging

from obsingest.bus.pubsub import topic_path
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.relay")


class PubSubDeadLetter:
    """Publishes given-up messages to the dead-letter topic, waiting for the message id."""

    def __init__(self, project: str, topic: str) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        self.path = topic_path(project, topic)
        self.client = pubsub_v1.PublisherClient()

    def publish(self, data: bytes, attributes: dict[str, str]) -> str:
        message_id: str = self.client.publish(self.path, data, **attributes).result(timeout=10)
        log_event(log, "relay.dlq_published", logging.INFO, topic=self.path, id=message_id)
        return message_id
