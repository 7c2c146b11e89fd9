"""Resource exhaustion, classified once: which failures mean "something ran out".

Running out of disk, quota, rate, connection slots or memory is an outage, never a verdict on the
input (unclassified, a full disk quarantined good CCDs). ``exhaustion_of`` classifies, reading
only the exception and its causes; ``exhausted`` builds the retriable ``ResourceExhausted``.
"""

from __future__ import annotations

import errno
from enum import Enum

from obsingest.errors import (
    BusFull,
    ConnectionSlotsExhausted,
    DestinationFull,
    DiskFull,
    OutOfMemory,
    QuotaExceeded,
    RateLimited,
    RegistryFull,
    ResourceExhausted,
)


class Exhaustion(Enum):
    """What ran out: the closed set."""

    DISK_FULL = "disk-full"
    QUOTA = "quota"
    RATE_LIMIT = "rate-limit"
    CONNECTION_SLOTS = "connection-slots"
    MEMORY = "memory"


#: errno values that mean a full filesystem or a used-up disk quota, and no memory
_ERRNOS = {
    errno.ENOSPC: Exhaustion.DISK_FULL,
    errno.EDQUOT: Exhaustion.DISK_FULL,
    errno.ENOMEM: Exhaustion.MEMORY,
}
#: PostgreSQL SQLSTATE class 53 (insufficient resources): disk full, out of memory, too many
#: connections; 53400 (configuration limit exceeded) is left to the registry's own verdict
SQLSTATES = {"53100": Exhaustion.DISK_FULL, "53200": Exhaustion.MEMORY, "53300": Exhaustion.CONNECTION_SLOTS}
#: SQLite's primary result codes (``sqlite3.Error.sqlite_errorcode`` & 0xff)
_SQLITE_CODES = {13: Exhaustion.DISK_FULL, 7: Exhaustion.MEMORY}  # SQLITE_FULL, SQLITE_NOMEM
#: HTTP statuses: Too Many Requests, Insufficient Storage
_HTTP = {429: Exhaustion.RATE_LIMIT, 507: Exhaustion.DISK_FULL}
#: the words drivers and services use, lower case, in the order they are tried ("disk quota
#: exceeded" is a full disk, not a service quota)
_WORDS: tuple[tuple[str, Exhaustion], ...] = (
    ("no space left on device", Exhaustion.DISK_FULL),
    ("disk quota exceeded", Exhaustion.DISK_FULL),
    ("database or disk is full", Exhaustion.DISK_FULL),
    ("could not extend file", Exhaustion.DISK_FULL),
    ("kafka_storage_error", Exhaustion.DISK_FULL),
    ("throttling_quota_exceeded", Exhaustion.QUOTA),
    ("too many clients", Exhaustion.CONNECTION_SLOTS),
    ("too many connections", Exhaustion.CONNECTION_SLOTS),
    ("remaining connection slots are reserved", Exhaustion.CONNECTION_SLOTS),
    ("out of memory", Exhaustion.MEMORY),
    ("cannot allocate memory", Exhaustion.MEMORY),
    ("ratelimitexceeded", Exhaustion.RATE_LIMIT),
    ("rate limit", Exhaustion.RATE_LIMIT),
    ("too many requests", Exhaustion.RATE_LIMIT),
    ("quotaexceeded", Exhaustion.QUOTA),
    ("quota exceeded", Exhaustion.QUOTA),
    ("exceeded quota", Exhaustion.QUOTA),
    ("resource_exhausted", Exhaustion.QUOTA),
)
#: how deep the chain of causes is followed (SQLAlchemy wraps the driver, retries wrap both)
_MAX_DEPTH = 6


def exhaustion_of(exc: BaseException) -> Exhaustion | None:
    """What ran out, if ``exc`` (or one of its causes) says a resource is exhausted; else None.
    Reads ``ResourceExhausted``, ``MemoryError``, errno, SQLSTATE, SQLite codes, HTTP status,
    then the message's words."""
    seen: set[int] = set()
    current: BaseException | None = exc
    for _ in range(_MAX_DEPTH):
        if current is None or id(current) in seen:
            return None
        seen.add(id(current))
        # SQLAlchemy's DBAPIError wraps the driver's error: read that one, not the wrapper's
        # text, which repeats the statement's parameters (the input's own words)
        orig = getattr(current, "orig", None)
        found = _own_exhaustion(orig if isinstance(orig, BaseException) else current)
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def _own_exhaustion(exc: BaseException) -> Exhaustion | None:
    if isinstance(exc, ResourceExhausted):  # classified once, stays classified
        return next((kind for kind, (cls, _) in _BY_KIND.items() if isinstance(exc, cls)), None)
    if isinstance(exc, MemoryError):
        return Exhaustion.MEMORY
    if isinstance(exc, OSError) and exc.errno in _ERRNOS:
        return _ERRNOS[exc.errno]
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if isinstance(sqlstate, str) and sqlstate in SQLSTATES:
        return SQLSTATES[sqlstate]
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE_CODES:
        return _SQLITE_CODES[code & 0xFF]
    status = http_status(exc)
    if status in _HTTP:
        return _HTTP[status]
    text = str(exc)
    # Google API errors carry the service's reasons ("rateLimitExceeded") in ``errors``
    details = getattr(exc, "errors", None)
    if isinstance(details, list):
        text += " " + " ".join(str(d.get("reason", "")) for d in details if isinstance(d, dict))
    text = text.lower()
    return next((kind for words, kind in _WORDS if words in text), None)


#: Kafka's error names (``KafkaError.name()``) that mean a broker ran out of something: its log
#: directory's disk (the broker answers KAFKA_STORAGE_ERROR, then takes the directory offline),
#: a client quota
KAFKA_NAMES = {"KAFKA_STORAGE_ERROR": Exhaustion.DISK_FULL, "THROTTLING_QUOTA_EXCEEDED": Exhaustion.QUOTA}


def kafka_exhaustion(name: str) -> Exhaustion | None:
    """What ran out according to a Kafka error's name (no confluent_kafka import here)."""
    return KAFKA_NAMES.get(name)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an error carries (``code``, or its ``response``'s), else None."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and 100 <= code <= 599:
        return code
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


#: (what ran out, which resource) -> the error class; the resource's own class when it has one
_DISK_BY_RESOURCE: dict[str, type[ResourceExhausted]] = {
    "destination": DestinationFull,
    "store": DestinationFull,
    "registry": RegistryFull,
    "bus": BusFull,
}
#: what ran out -> its error class, and what an operator reads
_BY_KIND: dict[Exhaustion, tuple[type[ResourceExhausted], str]] = {
    Exhaustion.DISK_FULL: (DiskFull, "no space left"),
    Exhaustion.QUOTA: (QuotaExceeded, "quota exceeded"),
    Exhaustion.RATE_LIMIT: (RateLimited, "rate limited"),
    Exhaustion.CONNECTION_SLOTS: (ConnectionSlotsExhausted, "no connection slots"),
    Exhaustion.MEMORY: (OutOfMemory, "out of memory"),
}
#: every reason a ResourceExhausted carries (a failure recorded by its reason alone, such as a
#: backfill's per-file failures, is told apart by it)
EXHAUSTION_REASONS = frozenset(
    {ResourceExhausted.reason, *(c.reason for c in _DISK_BY_RESOURCE.values())}
    | {c.reason for c, _ in _BY_KIND.values()}
)


def exhausted(kind: Exhaustion, resource: str, where: str, detail: str = "") -> ResourceExhausted:
    """The ``ResourceExhausted`` for ``kind`` at ``resource`` (``destination``, ``registry``,
    ``bus``, ``disk``, ...) ``where`` (a path or URL); its message is the one line an operator
    reads: ``destination /data/store: no space left (OSError: [Errno 28] ...)``."""
    cls, what = _BY_KIND[kind]
    if kind is Exhaustion.DISK_FULL:
        cls = _DISK_BY_RESOURCE.get(resource, DiskFull)
    message = f"{resource} {where}: {what}"
    if detail:
        message += f" ({' '.join(detail.split())[:300]})"
    return cls(message, resource, where)


def as_exhausted(exc: BaseException, resource: str, where: str) -> ResourceExhausted | None:
    """``exc`` as a ``ResourceExhausted`` of ``resource`` at ``where`` if it is one (already
    classified errors are returned as they are); None otherwise."""
    if isinstance(exc, ResourceExhausted):
        return exc
    kind = exhaustion_of(exc)
    if kind is None:
        return None
    return exhausted(kind, resource, where, f"{type(exc).__name__}: {exc}")


def one_line(exc: BaseException) -> str | None:
    """For a command that failed: one line naming what ran out and where (an ``OSError``'s
    file name), or None when ``exc`` is no exhaustion."""
    if isinstance(exc, ResourceExhausted):
        return str(exc)
    kind = exhaustion_of(exc)
    if kind is None:
        return None
    where = getattr(exc, "filename", None) or ""
    resource = "memory" if kind is Exhaustion.MEMORY else "disk"
    detail = getattr(exc, "strerror", None) or f"{type(exc).__name__}: {exc}"
    return str(exhausted(kind, resource, str(where) or "-", str(detail)))
