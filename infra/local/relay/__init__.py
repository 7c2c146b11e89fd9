"""Pub/Sub push for emulators, which never push: pull a subscription, POST each message as push
would, ack on 2xx, nack with backoff otherwise, dead-letter after N attempts (``obsingest relay``).
"""

from infra.local.relay.loop import Relay
from infra.local.relay.policy import Action, PushResult, backoff_seconds, decide, push_envelope
from infra.local.relay.push import HttpPushTarget, InProcessTarget
from infra.local.relay.settings import RelaySettings
from obsingest.bus.pull import Delivery

__all__ = [
    "Action",
    "Delivery",
    "HttpPushTarget",
    "InProcessTarget",
    "PushResult",
    "Relay",
    "RelaySettings",
    "backoff_seconds",
    "decide",
    "push_envelope",
]
