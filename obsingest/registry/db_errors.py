"""What a database error means for the input that caused it (a value the database refuses fails
the same way every time: quarantined, not retried until dead-lettered), and text the database can
hold (SQLite enforces neither VARCHAR lengths nor the NUL rule: ``storable`` makes both backends
keep the same record).
"""

from __future__ import annotations

import hashlib
from enum import Enum

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from obsingest.errors import RetriableError


class RegistryUnavailable(RetriableError, reason="registry-unavailable"):
    """The database could not be reached or stayed busy through every retry."""


class Verdict(Enum):
    TRANSIENT = "transient"  # retry, then 503: the same input may succeed later
    PERMANENT = "permanent"  # the input cannot be stored: quarantine it
    UNKNOWN = "unknown"  # not a database error, or one that means a bug: let it propagate


#: SQLSTATE classes (first two characters) that retrying can fix: connection exception,
#: transaction rollback (serialization failure, deadlock), insufficient resources (too many
#: connections, disk full), object not in prerequisite state (lock not available), operator
#: intervention (admin shutdown, cannot connect now, query cancelled), system error, internal.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "55", "57", "58", "XX"})
#: SQLSTATE classes the input itself causes: data exception, integrity constraint violation,
#: program limit exceeded.
PERMANENT_CLASSES = frozenset({"22", "23", "54"})


def classify(exc: BaseException) -> Verdict:
    """The verdict on ``exc`` raised by a database call (SQLAlchemy-wrapped or not)."""
    if isinstance(exc, PoolTimeout):
        return Verdict.TRANSIENT
    if isinstance(exc, UnicodeError):  # a lone surrogate cannot be encoded for the driver
        return Verdict.PERMANENT
    if not isinstance(exc, DBAPIError):
        return Verdict.UNKNOWN
    if exc.connection_invalidated:
        return Verdict.TRANSIENT
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None)  # psycopg; None for client-side errors
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        if sqlstate[:2] in PERMANENT_CLASSES:
            return Verdict.PERMANENT
        if sqlstate[:2] in TRANSIENT_CLASSES:
            return Verdict.TRANSIENT
        return Verdict.UNKNOWN  # e.g. 42: undefined table, syntax: a bug or a missing migration
    # No SQLSTATE (SQLite; psycopg's own checks such as NUL in text): the PEP 249 category,
    # which SQLAlchemy's wrapper class mirrors, decides.
    if isinstance(exc, (DataError, IntegrityError)):
        return Verdict.PERMANENT
    if isinstance(exc, OperationalError):  # locked, busy, I/O error, connection refused or lost
        return Verdict.TRANSIENT
    return Verdict.UNKNOWN


def describe(exc: BaseException, limit: int = 300) -> str:
    """The driver's one-line message, without SQLAlchemy's SQL and parameters (the input again)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    sqlstate = getattr(orig, "sqlstate", None)
    text = " ".join(str(orig).split())
    text = f"{type(orig).__name__}{f' [{sqlstate}]' if sqlstate else ''}: {text}"
    return storable(text, limit)


def storable(text: str, limit: int, max_bytes: int | None = None) -> str:
    """``text`` as every backend can hold it: NUL and lone surrogates escaped, at most ``limit``
    characters (and ``max_bytes`` of UTF-8); a shortened value ends with a digest of the whole,
    so two long values that share a prefix stay distinct in a unique key."""
    safe = text.replace("\x00", "\\x00")
    safe = safe.encode("utf-8", "backslashreplace").decode("utf-8")
    max_bytes = max_bytes if max_bytes is not None else 4 * limit
    if len(safe) <= limit and len(safe.encode("utf-8")) <= max_bytes:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    suffix = f"...[{len(text)} chars, sha256 {digest}]"
    head = safe[: max(0, limit - len(suffix))].encode("utf-8")[: max(0, max_bytes - len(suffix))]
    return head.decode("utf-8", "ignore") + suffix  # "ignore": a character cut in two
