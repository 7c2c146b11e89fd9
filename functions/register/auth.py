"""Push-endpoint authentication: Pub/Sub push signs each request with a Google OIDC token.

When enabled, a request without a bearer token gets 401, one with an invalid token, wrong
audience or wrong service account gets 403, before any work is done.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from obsingest.logs import get_logger, log_event
from obsingest.settings import FunctionSettings

log = get_logger("obsingest.register.auth")


@cache
def _request() -> Any:
    """One HTTP session per process for fetching Google's token signing keys."""
    from google.auth.transport import requests as google_requests

    return google_requests.Request()


def verify_push_request(
    request: Any, settings: FunctionSettings | None = None
) -> tuple[str, int] | None:
    """None when the request may proceed, else the (body, status) to answer with."""
    settings = settings or FunctionSettings()
    if not settings.push_auth:
        return None
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        log_event(log, "push.unauthenticated", remote=getattr(request, "remote_addr", None))
        return "missing bearer token", 401
    token = header[len("Bearer ") :]
    from google.auth import jwt
    from google.auth.exceptions import GoogleAuthError, TransportError
    from google.oauth2 import id_token

    try:  # cheap local checks first: a malformed or misaddressed token never costs a fetch
        unverified = jwt.decode(token, verify=False)
    except (ValueError, GoogleAuthError) as exc:
        log_event(log, "push.forbidden", error=f"malformed token: {exc}")
        return "invalid token", 403
    if unverified.get("aud") != settings.push_audience:
        log_event(log, "push.forbidden", error=f"audience {unverified.get('aud')!r}")
        return "token for another audience", 403
    try:
        claims = id_token.verify_oauth2_token(token, _request(), audience=settings.push_audience)
    except TransportError as exc:  # Google's keys unreachable: not the caller's fault, retry
        log_event(log, "push.cannot_verify", logging.WARNING, error=str(exc))
        return "cannot fetch token signing keys", 503
    except (ValueError, GoogleAuthError) as exc:
        log_event(log, "push.forbidden", error=str(exc))
        return "invalid token", 403
    if settings.push_service_account and (
        claims.get("email") != settings.push_service_account or not claims.get("email_verified")
    ):
        log_event(log, "push.forbidden", email=claims.get("email"))
        return "token not from the expected service account", 403
    return None
