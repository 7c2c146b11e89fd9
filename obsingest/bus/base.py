"""The publishing contract: ``publish`` returns only once the bus has accepted the message.

Callers rely on that to order side effects (register, then publish, then ack the input): if
publish raises, the input is not acked and redelivery republishes.
"""

from __future__ import annotations

from typing import Protocol


class Publisher(Protocol):
    def publish(
        self, topic: str, data: bytes, *, key: str | None = None, attributes: dict[str, str] | None = None
    ) -> str:
        """Publish and wait for the broker's acknowledgement; returns a message id."""
        ...

    def close(self) -> None: ...
