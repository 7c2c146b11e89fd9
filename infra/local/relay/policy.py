"""The relay's delivery policy as pure functions with Pub/Sub push semantics (so a function
behaves the same behind either): ack / nack with backoff / dead-letter, the envelope, the
dead-letter attributes."""

from __future__ import annotations

import base64
import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from obsingest.bus.pull import Delivery


@dataclass(frozen=True)
class PushResult:
    """What the push endpoint answered: an HTTP status, or None when it did not answer."""

    status: int | None
    body: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        if self.status is None:
            return f"no response: {self.error}"[:500]
        return f"HTTP {self.status}: {self.body}"[:500]


class Action(enum.Enum):
    ACK = "ack"
    NACK = "nack"
    DEAD_LETTER = "dead-letter"


def decide(result: PushResult, attempts: int, max_attempts: int) -> Action:
    """2xx acks; any other answer retries until ``max_attempts`` pushes, then dead-letters."""
    if result.ok:
        return Action.ACK
    return Action.DEAD_LETTER if attempts >= max_attempts else Action.NACK


def backoff_seconds(attempts: int, min_backoff: float, max_backoff: float) -> int:
    """Redelivery delay after ``attempts`` failed pushes (whole seconds: what Pub/Sub takes)."""
    delay = min(max_backoff, min_backoff * 2 ** max(attempts - 1, 0))
    return min(600, int(delay + 0.999))


def push_envelope(delivery: Delivery, subscription: str) -> dict[str, Any]:
    """The JSON body Pub/Sub push POSTs (message data base64-encoded)."""
    published = (delivery.publish_time or datetime.now(UTC)).astimezone(UTC)
    return {
        "message": {
            "data": base64.b64encode(delivery.data).decode(),
            "attributes": dict(delivery.attributes),
            "messageId": delivery.message_id,
            "message_id": delivery.message_id,
            "publishTime": published.isoformat().replace("+00:00", "Z"),
        },
        "subscription": subscription,
        "deliveryAttempt": delivery.delivery_attempt or None,
    }


#: the most bytes (UTF-8) Pub/Sub takes in one attribute value
MAX_ATTRIBUTE_BYTES = 1024


def dead_letter_attributes(delivery: Delivery, result: PushResult, attempts: int) -> dict[str, str]:
    """The original attributes plus why and after how many attempts it was given up (the reason
    cut to what Pub/Sub takes: a longer value fails the whole publish)."""
    reason = result.describe().encode()[:MAX_ATTRIBUTE_BYTES].decode("utf-8", "ignore")
    return {
        **delivery.attributes,
        "dlq_reason": reason,
        "dlq_attempts": str(attempts),
        "dlq_status": str(result.status) if result.status is not None else "none",
        "dlq_message_id": delivery.message_id,
    }
