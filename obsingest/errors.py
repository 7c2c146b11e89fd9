"""Error classes: retriable ones are redelivered / backed off; permanent ones are quarantined
with their reason and acknowledged, so one bad input never blocks the stream behind it."""

from __future__ import annotations

import pickle
from typing import Any, ClassVar

#: Every class's ``reason``, added at class definition: the metrics' closed ``reason`` label set.
REASONS: set[str] = {"error"}


class ObsIngestError(Exception):
    """Base of every error raised on purpose. ``__reduce__`` pickles it without calling a
    subclass's ``__init__`` (default pickling calls ``cls(*args)``, missing other arguments)."""

    retriable: bool = False
    #: short machine-readable reason, stored in quarantine records and dead-letter attributes
    reason: str = "error"
    #: other reasons a class may set per instance (a dead-letter reason from a vocabulary)
    reasons: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, reason: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reason = reason or cls.reason
        REASONS.add(cls.reason)
        REASONS.update(str(reason) for reason in cls.reasons)

    def __reduce__(self) -> tuple[Any, ...]:
        state = {key: _picklable(value) for key, value in self.__dict__.items()}
        return (_rebuild_error, (type(self), self.args), state)


def _rebuild_error(cls: type[ObsIngestError], args: tuple[Any, ...]) -> ObsIngestError:
    error = cls.__new__(cls)
    error.args = args
    return error


def _picklable(value: Any) -> Any:
    """``value``, or a stand-in naming it when it does not survive pickling (a library error
    holding a socket, or whose ``__init__`` takes more than its message)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        if isinstance(value, BaseException):
            return RuntimeError(f"{type(value).__name__}: {value}")
        return repr(value)
    return value


class RetriableError(ObsIngestError, reason="transient"):
    """Transient: the same input may succeed later (network, 5xx, 429, pool exhausted, ...)."""

    retriable = True


class PermanentError(ObsIngestError, reason="permanent"):
    """The input itself is wrong; retrying cannot help. Quarantine it with the reason."""


class BadObjectName(PermanentError, reason="bad-object-name"):
    """An object name does not parse as a data id, or escapes the expected prefix."""


class UnknownInstrument(BadObjectName, reason="unknown-instrument"):
    pass


class CorruptFile(PermanentError, reason="corrupt-file"):
    """The bytes are not a valid (compressed) FITS file: truncated, garbled, wrong headers."""


class HeaderMismatch(PermanentError, reason="header-mismatch"):
    """The FITS header names a different data id than the object name."""


class NoIdentity(HeaderMismatch, reason="no-identity"):
    """A header that cannot say which CCD it is (no instrument, observation or detector)."""


class ForeignBucket(PermanentError, reason="foreign-bucket"):
    """A notification for an object in a bucket this deployment does not ingest from."""


class ObjectMissing(PermanentError, reason="object-missing"):
    """An event refers to an object that no longer exists in the store."""


class ChecksumConflict(PermanentError, reason="checksum-conflict"):
    """The same data id arrived again with different bytes: never silently overwritten."""


class ChecksumMismatch(PermanentError, reason="checksum-mismatch"):
    """Bytes do not match the checksum that travelled with them (corruption in transit)."""


class BadMetadata(PermanentError, reason="bad-metadata"):
    """Custom object metadata the register function carries on is not what a producer writes."""


class BadMessage(PermanentError, reason="bad-message"):
    """A message does not decode: unknown schema fingerprint, wrong magic, invalid Avro."""


class ServiceUnavailable(RetriableError, reason="service-unavailable"):
    pass


class UnstorableInput(PermanentError, reason="unstorable-input"):
    """The registry cannot hold this input (value out of range or too long, integrity violation)."""


class RequestRefused(PermanentError, reason="request-refused"):
    """An HTTP request that is no delivery: answered 4xx with the reason, nothing quarantined."""

    status = 400  # the HTTP answer


class NotADelivery(RequestRefused, reason="not-a-delivery"):
    """The body is not a Pub/Sub push envelope or a CloudEvent."""


class RequestTooLarge(RequestRefused, reason="request-too-large"):
    """The body is over the endpoint's size limit; refused before it is read."""

    status = 413


class NestingTooDeep(RequestRefused, reason="nesting-too-deep"):
    """JSON nested deeper than any notification is; refused before it is parsed."""


class ResourceExhausted(RetriableError, reason="resource-exhausted"):
    """A resource ran out (disk, quota, rate, connection slots, memory): an outage, retried,
    never quarantined. ``resource`` and ``where`` tell the operator what to free."""

    def __init__(self, message: str, resource: str = "", where: str = "") -> None:
        super().__init__(message)
        self.resource = resource
        self.where = where


class DiskFull(ResourceExhausted, reason="disk-full"):
    """A filesystem is full or over its quota (ENOSPC, EDQUOT, SQLITE_FULL, SQLSTATE 53100)."""


class DestinationFull(DiskFull, reason="destination-full"):
    """The object store's filesystem (a local store's directory) or its storage is full."""


class RegistryFull(DiskFull, reason="registry-full"):
    """The registry's database cannot grow: PostgreSQL's or SQLite's disk is full."""


class BusFull(DiskFull, reason="bus-full"):
    """The message bus cannot store more: a Kafka broker's log directory is full."""


class QuotaExceeded(ResourceExhausted, reason="quota-exceeded"):
    """A service quota is used up (GCS ``quotaExceeded``, gRPC RESOURCE_EXHAUSTED)."""


class RateLimited(ResourceExhausted, reason="rate-limited"):
    """A service asks to slow down (HTTP 429, GCS ``rateLimitExceeded``)."""


class ConnectionSlotsExhausted(ResourceExhausted, reason="connection-slots"):
    """The database takes no more connections (SQLSTATE 53300)."""


class OutOfMemory(ResourceExhausted, reason="out-of-memory"):
    """Memory ran out (MemoryError, ENOMEM, SQLSTATE 53200, SQLITE_NOMEM)."""
