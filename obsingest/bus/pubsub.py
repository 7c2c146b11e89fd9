"""Publish to Google Pub/Sub (or its emulator, via PUBSUB_EMULATOR_HOST).

``publish`` returns the message id only once Pub/Sub has the message. Each call is one Publish
RPC in the calling thread, not the batching client (every caller waits for its own message, and
the batcher's threads cost more CPU than the RPC), made directly (``direct_rpc``); a failure the
generated ``api.publish`` would retry goes through it, bounded by what is left of ``timeout``.

Every failure is a RetriableError (PublishFailed), even a missing topic: it is never the input's
fault, so the message is redelivered (and eventually dead-lettered), not quarantined.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any

from obsingest.bus.direct_rpc import DirectRpcs
from obsingest.errors import RetriableError
from obsingest.exhaustion import as_exhausted
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.bus.pubsub")


class PublishFailed(RetriableError, reason="publish-failed"):
    """The bus did not confirm the message in time, or refused it."""


def topic_path(project: str, topic: str) -> str:
    """``projects/P/topics/T``; a full path is returned unchanged."""
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


class PubSubPublisher:
    """One PublisherClient per process, reused for every topic."""

    def __init__(self, project: str, *, timeout: float = 5.0, client: Any = None) -> None:
        from google.api_core import exceptions as api_exceptions
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        from obsingest.retry import PUBSUB_PUBLISH, api_core_retry  # as lazily as the client

        self.project = project
        self.timeout = timeout
        self.client = client or pubsub_v1.PublisherClient()
        #: the Publish RPC itself (module doc); an injected client is called through its method
        self._direct = DirectRpcs(self.client.transport.grpc_channel) if client is None else None
        #: the generated client's Publish retry, also on a cancel, deadline or quota answer
        also = (api_exceptions.Cancelled, api_exceptions.DeadlineExceeded, api_exceptions.ResourceExhausted)
        self._retry = api_core_retry(PUBSUB_PUBLISH, timeout, *also)
        #: what a failed direct attempt hands to that retry: all but a deadline, after which the
        #: whole ``timeout`` has passed
        self._direct_retried = tuple(e for e in also if e is not api_exceptions.DeadlineExceeded)

    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        """Publish and wait for the message id. ``key`` has no meaning for Pub/Sub (no ordering
        keys: subscribers deduplicate rather than rely on order) and is carried as an attribute."""
        from google.api_core import exceptions as api_exceptions

        attrs = {str(k): str(v) for k, v in (attributes or {}).items()}
        if key is not None:
            attrs.setdefault("key", key)
        path = topic_path(self.project, topic)
        started = time.monotonic()

        def generated() -> Any:
            from google.pubsub_v1 import PubsubMessage

            return self.client.api.publish(
                topic=path,
                messages=[PubsubMessage(data=data, attributes=attrs)],
                retry=self._retry,
                timeout=max(self.timeout - (time.monotonic() - started), 0.1),
            )

        try:
            if self._direct is None:
                response = generated()
            else:
                request = {"topic": path, "messages": [{"data": data, "attributes": attrs}]}
                response = self._direct.call(
                    "publish", request, self.timeout, generated, self._direct_retried
                )
            message_id: str = response.message_ids[0]
        except (concurrent.futures.TimeoutError, TimeoutError, api_exceptions.DeadlineExceeded) as exc:
            log_event(log, "pubsub.publish_timeout", logging.WARNING, topic=path, key=key)
            raise PublishFailed(f"publish to {path}: no confirmation in {self.timeout} s") from exc
        except (api_exceptions.GoogleAPIError, RuntimeError, ValueError) as exc:
            # the retry gave up: what the last attempt got says why
            cause = exc.cause if isinstance(exc, api_exceptions.RetryError) else None
            log_event(log, "pubsub.publish_failed", logging.WARNING, topic=path, error=str(exc))
            # RESOURCE_EXHAUSTED (quota, rate): still retriable, with the reason that says so
            raise as_exhausted(cause or exc, "bus", path) or PublishFailed(
                f"publish to {path}: {cause or exc}"
            ) from exc
        return message_id

    def close(self) -> None:
        """Stop the client (nothing is batched: every publish has returned)."""
        self.client.stop()
