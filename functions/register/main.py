"""functions-framework entry points of the register function (deployable as Cloud Functions gen2).

- ``on_object_finalized``: CloudEvent trigger; accepts a storage finalize CloudEvent or a Pub/Sub
  CloudEvent wrapping a GCS notification.
- ``on_push``: HTTP trigger for Pub/Sub push (and ``obsingest relay``), JSON envelope.

Transport semantics: a retriable failure raises / returns 5xx so the platform redelivers; a
permanent one is quarantined by the service and acknowledged (2xx).

Dependencies are built on first use from settings (never at import time), once per process, so
one bounded registry pool serves every invocation of an instance (see ``wiring``).
"""

from __future__ import annotations

from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from functions.register.service import Outcome
from functions.register.wiring import get_service
from obsingest.errors import BadMessage, RetriableError
from obsingest.logs import get_logger, log_event
from obsingest.store import notifications

log = get_logger("obsingest.register.http")


@functions_framework.cloud_event
def on_object_finalized(event: CloudEvent) -> None:
    """Raise on retriable failure (the trigger redelivers); return normally otherwise."""
    handle_cloudevent(event)


def handle_cloudevent(event: CloudEvent) -> Outcome:
    attributes = dict(event.get_attributes())
    try:
        parsed = notifications.parse_cloudevent(attributes.get("type", ""), attributes, event.data)
    except BadMessage as exc:
        return get_service().quarantine_message(f"cloudevent:{attributes.get('id', '')}", exc)
    return get_service().handle(parsed)


@functions_framework.http
def on_push(request: Any) -> tuple[str, int]:
    """Pub/Sub push endpoint: 2xx acks, 5xx makes Pub/Sub (or the relay) retry."""
    from functions.register.auth import verify_push_request

    denied = verify_push_request(request)
    if denied is not None:
        return denied
    body = request.get_json(silent=True)
    try:
        parsed = notifications.from_push_envelope(body)
    except BadMessage as exc:
        message_id = (
            ((body or {}).get("message") or {}).get("messageId", "")
            if isinstance(body, dict)
            else ""
        )
        try:
            outcome = get_service().quarantine_message(f"pubsub:{message_id}", exc)
        except RetriableError as retry:
            return f"retriable: {retry}", 503
        return f"{outcome.status}: {exc}", 200
    try:
        outcome = get_service().handle(parsed)
    except RetriableError as exc:
        log_event(log, "push.retry", object=parsed.obj.name, reason=exc.reason, error=str(exc))
        return f"retriable: {exc}", 503
    return f"{outcome.status} {outcome.object_name} {outcome.reason}".strip(), 200
