"""Errors of the local stack: a service that will not fetch, start or become healthy."""

from __future__ import annotations

from obsingest.errors import ServiceUnavailable


class StackError(ServiceUnavailable, reason="stack-service-failed"):
    """A local service failed; the message carries the tail of that service's own log."""

    def __init__(self, service: str, message: str, log_tail: str = "") -> None:
        self.service = service
        self.log_tail = log_tail
        text = f"{service}: {message}"
        if log_tail:
            text += f"\n--- last lines of the {service} log ---\n{log_tail}"
        super().__init__(text)


class FetchError(StackError, reason="stack-fetch-failed"):
    """An artefact (jar, Go binary) could not be fetched or built."""
