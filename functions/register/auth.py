"""Push-endpoint authentication (Pub/Sub push's Google OIDC token): no bearer token is 401; an
invalid token, wrong audience or service account is 403, before any work. Google's signing keys
are cached while Cache-Control allows (google-auth fetches them on every call otherwise).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import Any

from obsingest.logs import get_logger, log_event
from obsingest.settings import FunctionSettings

log = get_logger("obsingest.register.auth")


class KeyCache:
    """A google-auth transport ``Request`` keeping successful GET responses while ``fresh_for``."""

    def __init__(self, inner: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._inner = inner
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, Any]] = {}

    def __call__(self, url: str, method: str = "GET", body: Any = None, **kwargs: Any) -> Any:
        if method != "GET" or body is not None:
            return self._inner(url, method=method, body=body, **kwargs)
        now = self._clock()
        with self._lock:
            kept = self._kept.get(url)
        if kept is not None and kept[0] > now:
            return kept[1]
        response = self._inner(url, method="GET", **kwargs)
        lifetime = fresh_for(getattr(response, "headers", None) or {})
        if getattr(response, "status", None) == 200 and lifetime > 0:
            with self._lock:
                self._kept[url] = (now + lifetime, response)
        return response


def fresh_for(headers: Mapping[str, str]) -> float:
    """Seconds a response stays fresh by its Cache-Control max-age and Age (RFC 9111)."""
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    directives = [d.strip().lower() for d in lowered.get("cache-control", "").split(",")]
    if "no-store" in directives or "no-cache" in directives:  # no-cache="field" limits a field only
        return 0.0
    for directive in directives:  # the first max-age, as RFC 9111 4.2.1 says
        if directive.startswith("max-age="):
            try:
                max_age = int(directive.split("=", 1)[1].strip('"'))
                age = int(lowered.get("age", "0") or 0)
            except ValueError:
                return 0.0
            return float(max(0, max_age - max(0, age)))
    return 0.0


@cache
def _request() -> Any:
    from google.auth.transport import requests as google_requests

    return KeyCache(google_requests.Request())


#: the environment variables FunctionSettings reads (pydantic-settings: any case)
_PREFIX = str(FunctionSettings.model_config.get("env_prefix", "")).upper()


def current_settings() -> FunctionSettings:
    """The function's settings, built again only when one of their variables changed (building
    them costs more CPU than the rest of the check)."""
    return _settings_of(tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(_PREFIX))))


@lru_cache(maxsize=1)  # a configuration error raises, every time, and is not kept
def _settings_of(_variables: tuple[tuple[str, str], ...]) -> FunctionSettings:
    return FunctionSettings()


def verify_push_request(request: Any, settings: FunctionSettings | None = None) -> tuple[str, int] | None:
    """None when the request may proceed, else the (body, status) to answer with."""
    settings = settings or current_settings()
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
