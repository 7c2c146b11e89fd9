"""Structured logging: one JSON object per line, one event per line. ``logging_context`` stamps
the CCD's data id on every line logged around its work, so logs can be grepped for one CCD.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

#: Fields stamped on every line logged in the current context (thread / task).
#: Never mutated in place: ``logging_context`` sets a new dict and resets the old one.
_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "obsingest_log_context", default=None
)

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonLineFormatter(logging.Formatter):
    """Render a record as one JSON line: time, level, logger, event, plus any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="microseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        payload.update(_CONTEXT.get() or {})
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, separators=(",", ":"))


def configure(level: str = "INFO", stream: Any = None) -> None:
    """Install the JSON-lines handler on the root logger (idempotent; called by entry points)."""
    root = logging.getLogger()
    handler = _JsonLineHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class _JsonLineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that drops lines it cannot write (log disk full, out of memory) instead
    of a traceback per line that would bury the outage's own report; says so once on stderr."""

    _dropping = False

    def handleError(self, record: logging.LogRecord) -> None:
        from obsingest.exhaustion import exhaustion_of

        error = sys.exc_info()[1]
        if error is None or exhaustion_of(error) is None:
            super().handleError(record)
            return
        if not self._dropping:
            self._dropping = True
            with suppress(Exception):
                (sys.__stderr__ or sys.stderr).write(f"obsingest: log lines dropped: {error}\n")


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``event`` with structured ``fields`` (data id parts, sizes, durations, reasons)."""
    logger.log(level, event, extra=fields)


@contextmanager
def logging_context(**fields: Any) -> Iterator[None]:
    """Stamp ``fields`` (``data_id=``, ``object=``) on every log line inside the block: nested
    contexts add to the outer one, a log call's own fields win, None values are left out; per
    thread (``contextvars``), so concurrent CCDs never mix."""
    merged = {**(_CONTEXT.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _CONTEXT.set(merged)
    try:
        yield
    finally:
        _CONTEXT.reset(token)
