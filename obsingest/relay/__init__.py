"""Pub/Sub push for emulators: pull a subscription, POST each message as push would, ack on 2xx,
dead-letter after N attempts. ``core`` holds the decisions; ``pubsub`` and ``push`` the edges."""

from obsingest.relay.core import (
    Action,
    Delivery,
    PushResult,
    Relay,
    RelaySettings,
    backoff_seconds,
    dead_letter_attributes,
    decide,
    push_envelope,
)
from obsingest.relay.push import HttpPushTarget, InProcessTarget, PushRequest

__all__ = [
    "Action",
    "Delivery",
    "HttpPushTarget",
    "InProcessTarget",
    "PushRequest",
    "PushResult",
    "Relay",
    "RelaySettings",
    "backoff_seconds",
    "dead_letter_attributes",
    "decide",
    "push_envelope",
]
