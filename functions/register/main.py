"""functions-framework entry points of the register function: ``on_object_finalized`` (storage
CloudEvent), ``on_push`` (Pub/Sub push, ``obsingest relay``), ``on_manifest`` (``exposures`` push).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from functions.register import http_errors
from functions.register.auth import verify_push_request
from functions.register.wiring import get_service, warm_up
from obsingest.errors import BadMessage, NotADelivery
from obsingest.store import notifications


@functions_framework.cloud_event
def on_object_finalized(event: CloudEvent) -> None:
    """Raise on retriable failure (answered 503: the trigger redelivers); return otherwise."""
    http_errors.entered()
    attributes = dict(event.get_attributes())
    try:
        parsed = notifications.parse_cloudevent(attributes.get("type", ""), attributes, event.data)
    except BadMessage as exc:
        get_service().quarantine_message(f"cloudevent:{_source_id(attributes.get('id'), attributes)}", exc)
        return
    get_service().handle(parsed)


def _push_endpoint(handle: Callable[[dict[str, Any]], tuple[str, int]]) -> Callable[[Any], tuple[str, int]]:
    """A Pub/Sub push endpoint handing the envelope to ``handle``: POST only, the token checked
    first, a non-envelope refused, every error answered by ``http_errors``."""

    @functools.wraps(handle)
    def endpoint(request: Any) -> tuple[str, int]:
        http_errors.entered()
        try:
            if getattr(request, "method", "POST") != "POST":
                return "only POST delivers a push message", 405
            if refused := verify_push_request(request):
                return refused
            body = request.get_json(silent=True)
            if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
                raise NotADelivery(
                    "request body is not a Pub/Sub push envelope "
                    '{"message": {"data": ..., "attributes": ..., "messageId": ...}, "subscription": ...}'
                )
            return handle(body)
        except Exception as exc:
            return http_errors.reply_for(exc)

    functions_framework.http(endpoint)  # registers its signature type under the name
    return endpoint


@_push_endpoint
def on_push(body: dict[str, Any]) -> tuple[str, int]:
    """2xx acks, 503 makes Pub/Sub (or the relay) retry, 4xx refuses a non-delivery."""
    message = body["message"]
    try:
        parsed = notifications.from_push_envelope(body)
    except BadMessage as exc:
        source = f"pubsub:{_source_id(notifications.message_id(message), message)}"
        outcome = get_service().quarantine_message(source, exc)
        return f"{outcome.status}: {outcome.reason}: {notifications.clip(str(exc), 500)}", 200
    outcome = get_service().handle(parsed)
    name, reason = notifications.clip(outcome.object_name, 200), outcome.reason[:100]
    return f"{outcome.status} {name} {reason}".strip(), 200


@_push_endpoint
def on_manifest(body: dict[str, Any]) -> tuple[str, int]:
    """The ``exposures`` topic's push: as ``on_push``, for ExposureManifests."""
    from functions.register.manifest_push import handle_push

    service = get_service()
    return handle_push(body, service.registry, service.closer.close)


def _source_id(given: Any, content: Any) -> str:
    """The delivery's own id, else a digest of its content (bad deliveries stay distinct)."""
    if isinstance(given, (str, int)) and not isinstance(given, bool) and str(given):
        return str(given)
    canonical = json.dumps(content, sort_keys=True, default=repr)  # parsed JSON: it always dumps
    return "sha256-" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def install_on_framework_app() -> None:
    """Under functions-framework (in its Flask app's context): install ``http_errors`` and build
    the service; a plain import (tests) does neither."""
    import flask

    if flask.has_app_context():
        http_errors.install(flask.current_app._get_current_object())  # type: ignore[attr-defined]
        warm_up()


install_on_framework_app()
