"""The one place where an error becomes an HTTP reply: retriable -> 503 with Retry-After,
``RequestRefused`` -> its 4xx, other permanent or an unreadable CloudEvent -> 400, werkzeug's
errors as they are, anything else (a bug) -> 500. A delivery's permanent problem never gets here:
it is quarantined and acked (functions/register/README.md, "Malformed input").
"""

from __future__ import annotations

import logging
from typing import Any

from functions.register.auth import current_settings
from functions.register.request_guard import body_guard
from obsingest.errors import PermanentError, RequestRefused, RetriableError
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.register.http")

#: Set on ``flask.g`` when an entry point starts: an error before it is an unreadable request.
STARTED = "obsingest_entry_point_started"


def reply_for(exc: BaseException, before_entry: bool = False) -> tuple[str, int]:
    """(body, status) for an error raised while serving a request."""
    from cloudevents.exceptions import GenericException
    from werkzeug.exceptions import HTTPException

    from obsingest.exhaustion import as_exhausted

    # MemoryError or a raw ENOSPC: an outage of that resource, retried (503), not a bug or a drop
    exc = as_exhausted(exc, "function", "register function") or exc
    if isinstance(exc, RetriableError):
        log_event(log, "request.retry", logging.WARNING, reason=exc.reason, error=_short(exc))
        return f"retriable: {exc.reason}: {_short(exc)}", 503
    if isinstance(exc, PermanentError):  # a RequestRefused with its own 4xx
        log_event(log, "request.refused", logging.WARNING, reason=exc.reason, error=_short(exc))
        return f"{exc.reason}: {_short(exc)}", exc.status if isinstance(exc, RequestRefused) else 400
    if isinstance(exc, HTTPException):
        return f"{exc.code} {exc.name}: {exc.description}", int(exc.code or 500)
    if before_entry or isinstance(exc, GenericException | RecursionError):  # an unreadable CloudEvent
        error = f"{type(exc).__name__}: {_short(exc)}"
        log_event(log, "request.refused", logging.WARNING, reason="not-a-delivery", error=error)
        return f"not-a-delivery: cannot read the request: {error}", 400
    log.error("unexpected error serving a request", exc_info=exc)
    return f"internal error: {type(exc).__name__}", 500


def install(app: Any) -> None:
    """Body guard, error mapping, Retry-After and ``/metrics`` on the framework's ``app``; idempotent."""
    if getattr(app, "_obsingest_installed", False):
        return
    app._obsingest_installed = True
    app.wsgi_app = body_guard(app.wsgi_app, lambda: current_settings().max_request_bytes, reply_for)
    from obsingest.metrics_http import with_metrics_endpoint

    app.wsgi_app = with_metrics_endpoint(app.wsgi_app)

    def on_error(exc: Exception) -> Any:
        from flask import g
        from werkzeug.exceptions import HTTPException

        if isinstance(exc, HTTPException):
            return exc  # the framework's own rendering, with its headers (Allow, ...)
        return reply_for(exc, before_entry=not g.get(STARTED, False))

    def retry_after(response: Any) -> Any:
        if response.status_code == 503 and "Retry-After" not in response.headers:
            response.headers["Retry-After"] = str(current_settings().retry_after_seconds)
        return response

    app.register_error_handler(Exception, on_error)
    app.after_request(retry_after)


def entered() -> None:
    """Mark that an entry point runs (see STARTED); a no-op outside a Flask request."""
    from flask import g, has_app_context

    if has_app_context():
        g.setdefault(STARTED, True)


def _short(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
