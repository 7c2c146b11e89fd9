"""Publish to Google Pub/Sub (or its emulator, via PUBSUB_EMULATOR_HOST).

``publish`` returns the server's message id only after the publish future resolved: the register
function acks its input after this returns, so "returned" must mean "Pub/Sub has it". Batching is
tuned for latency (a few milliseconds of linger), not throughput: one ArrivalEvent per CCD, and
every millisecond counts against the 5 s budget.

Every failure is a RetriableError (PublishFailed), even a missing topic: it is never the input
object's fault, so the message must be redelivered (and eventually dead-lettered with the
reason), not quarantined.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from obsingest.errors import RetriableError
from obsingest.exhaustion import as_exhausted
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.bus.pubsub")


class PublishFailed(RetriableError):
    """The bus did not confirm the message in time, or refused it."""

    reason = "publish-failed"


def topic_path(project: str, topic: str) -> str:
    """``projects/P/topics/T``; a full path is returned unchanged."""
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


class PubSubPublisher:
    """One PublisherClient per process, reused for every topic."""

    def __init__(
        self,
        project: str,
        *,
        timeout: float = 5.0,
        max_latency: float = 0.002,
        client: Any = None,
    ) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        self.project = project
        self.timeout = timeout
        self.client = client or pubsub_v1.PublisherClient(
            batch_settings=pubsub_v1.types.BatchSettings(
                max_messages=100, max_bytes=1_000_000, max_latency=max_latency
            )
        )

    def publish(
        self,
        topic: str,
        data: bytes,
        *,
        key: str | None = None,
        attributes: dict[str, str] | None = None,
    ) -> str:
        """Publish and wait for the message id. ``key`` has no meaning for Pub/Sub (no ordering
        keys: subscribers deduplicate rather than rely on order) and is carried as an attribute."""
        from google.api_core import exceptions as api_exceptions

        attrs = {str(k): str(v) for k, v in (attributes or {}).items()}
        if key is not None:
            attrs.setdefault("key", key)
        path = topic_path(self.project, topic)
        try:
            future = self.client.publish(path, data, **attrs)
            message_id: str = future.result(timeout=self.timeout)
        except (concurrent.futures.TimeoutError, TimeoutError) as exc:
            log_event(log, "pubsub.publish_timeout", logging.WARNING, topic=path, key=key)
            raise PublishFailed(f"publish to {path}: no confirmation in {self.timeout} s") from exc
        except (api_exceptions.GoogleAPIError, RuntimeError, ValueError) as exc:
            log_event(log, "pubsub.publish_failed", logging.WARNING, topic=path, error=str(exc))
            # RESOURCE_EXHAUSTED (quota, rate): still retriable, with the reason that says so
            raise as_exhausted(exc, "bus", path) or PublishFailed(
                f"publish to {path}: {exc}"
            ) from exc
        return message_id

    def close(self) -> None:
        """Flush anything batched and stop the client's background threads."""
        self.client.stop()
