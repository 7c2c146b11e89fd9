"""Where the relay pushes: the function's URL over HTTP, or (demo, tests) the same entry point
called in this process with a request-shaped object."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from infra.local.relay.policy import PushResult


class HttpPushTarget:
    """POST the envelope as JSON, optionally with a Google-signed OIDC ID token. One urllib3 pool,
    the environment (proxy, CA bundle, ``.netrc``) resolved once: a requests session re-reads it
    per request, costlier than the push. No redirects: Pub/Sub push counts only a 2xx."""

    def __init__(self, url: str, *, timeout: float = 30.0, oidc_audience: str = "") -> None:
        import urllib3

        from obsingest.store.gcs import HttpEnvironment, pool_manager

        self.url = url
        self.timeout = timeout
        self.oidc_audience = oidc_audience
        environment = HttpEnvironment.resolve(url)
        self._http = pool_manager(environment, maxsize=32)
        self._timeout = urllib3.Timeout(connect=timeout, read=timeout)
        self._headers = {"Content-Type": "application/json"}
        if environment.netrc_auth is not None:
            basic = ":".join(environment.netrc_auth)
            self._headers.update(urllib3.make_headers(basic_auth=basic))
        self._credentials: Any = None

    def _bearer(self) -> str | None:
        """An ID token for the audience, refreshed by google-auth near expiry."""
        if not self.oidc_audience:
            return None
        import google.auth.transport.requests
        from google.oauth2 import id_token

        request = google.auth.transport.requests.Request()
        if self._credentials is None:
            self._credentials = id_token.fetch_id_token_credentials(self.oidc_audience, request=request)
        if not self._credentials.valid:
            self._credentials.refresh(request)
        return str(self._credentials.token)

    def push(self, envelope: dict[str, Any]) -> PushResult:
        headers = self._headers
        try:
            token = self._bearer()
            if token:
                headers = {**headers, "Authorization": f"Bearer {token}"}
            response = self._http.urlopen(
                "POST",
                self.url,
                body=json.dumps(envelope).encode(),
                headers=headers,
                timeout=self._timeout,
                retries=False,
                redirect=False,
            )
        except Exception as exc:  # refused, reset, timeout; token fetches fail in many types
            return PushResult(None, error=f"{type(exc).__name__}: {exc}")
        return PushResult(response.status, response.data[:4000].decode("utf-8", "replace")[:1000])

    def close(self) -> None:
        self._http.clear()


class PushRequest:
    """The little of a Flask request the push entry point reads: headers, JSON body, address."""

    def __init__(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._body = body
        self.headers = dict(headers or {})
        self.remote_addr = "in-process"

    def get_json(self, silent: bool = False) -> Any:
        return self._body


#: returns (body, status); functions_framework.http types it with Flask's return union
PushHandler = Callable[[Any], Any]


class InProcessTarget:
    """Call a functions-framework HTTP entry point (e.g. ``on_push``) directly."""

    def __init__(self, handler: PushHandler, headers: dict[str, str] | None = None) -> None:
        self.handler = handler
        self.headers = headers or {}

    def push(self, envelope: dict[str, Any]) -> PushResult:
        try:
            body, status = self.handler(PushRequest(envelope, self.headers))
        except Exception as exc:  # an uncaught error is a 500, as the framework would answer
            return PushResult(500, f"{type(exc).__name__}: {exc}")
        return PushResult(int(status), str(body)[:1000])
