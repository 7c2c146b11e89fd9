"""Request bodies bounded before anything reads or parses them (WSGI middleware). Flask's
MAX_CONTENT_LENGTH is not enough under functions-framework: its ``after_request`` reads the whole
body again (a refusal there becomes a 500) and the CloudEvent view parses before the function runs.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterable
from typing import Any

from obsingest.errors import NestingTooDeep, NotADelivery, RequestRefused, RequestTooLarge
from obsingest.store.notifications import MAX_JSON_DEPTH, json_nesting_exceeds

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
#: (body, status) for a refused request (``http_errors.reply_for``)
Refuse = Callable[[Exception], "tuple[str, int]"]

_READ_CHUNK = 64 * 1024


def body_guard(app: WsgiApp, max_bytes: Callable[[], int], refuse: Refuse) -> WsgiApp:
    """``app`` behind the guard; ``max_bytes`` is called once, on the first request."""
    limit = functools.cache(max_bytes)

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            body = read_bounded(environ, limit())
            if json_nesting_exceeds(body):
                raise NestingTooDeep(
                    f"request body nests JSON deeper than {MAX_JSON_DEPTH} levels; no notification does"
                )
        except RequestRefused as exc:
            text, status = refuse(exc)
            payload = text.encode("utf-8", "backslashreplace")
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(payload)))]
            start_response(f"{status} {_PHRASES.get(status, 'Refused')}", headers)
            return [payload]
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["wsgi.input_terminated"] = True
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return app(environ, start_response)

    return guarded


#: RFC 9110's reason phrases (Python 3.11's HTTPStatus still says "Request Entity Too Large")
_PHRASES = {400: "Bad Request", 413: "Content Too Large"}


def read_bounded(environ: dict[str, Any], limit: int) -> bytes:
    """The request body, at most ``limit`` bytes; RequestTooLarge beyond (unread if declared)."""
    stream = environ.get("wsgi.input")
    declared = environ.get("CONTENT_LENGTH") or ""
    if declared.strip():
        try:
            length = int(declared)
        except ValueError:
            raise NotADelivery(f"Content-Length {declared[:40]!r} is not a number") from None
        if length < 0:
            raise NotADelivery(f"Content-Length {length} is negative")
        if length > limit:
            raise RequestTooLarge(f"request body of {length} bytes is over the {limit}-byte limit; not read")
        body = _read(stream, length)
        if len(body) < length:
            raise NotADelivery(f"request body ended after {len(body)} of its {length} declared bytes")
        return body
    if not environ.get("wsgi.input_terminated"):
        return b""  # WSGI: no length and a stream that may not end means no body
    body = _read(stream, limit + 1)
    if len(body) > limit:
        raise RequestTooLarge(f"streamed request body is over the {limit}-byte limit")
    return body


def _read(stream: Any, size: int) -> bytes:
    if stream is None:
        return b""
    parts: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(min(_READ_CHUNK, remaining))
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)
