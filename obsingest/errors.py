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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
    """``value``, or a stand-in naming it when unpicklable (a library error holding a socket)."""
    try:
        pickle.dumps(value)
    except Exception:
        if isinstance(value, BaseException):
            return RuntimeError(f"{type(value).__name__}: {value}")
        return repr(value)
    return value


class RetriableError(ObsIngestError):
    """Transient: the same input may succeed later (network, 5xx, 429, pool exhausted, ...)."""

    retriable = True
    reason = "transient"


class PermanentError(ObsIngestError):
    """The input itself is wrong; retrying cannot help. Quarantine it with the reason."""

    retriable = False
    reason = "permanent"


class BadObjectName(PermanentError):
    """An object name does not parse as a data id, or escapes the expected prefix."""

    reason = "bad-object-name"


class UnknownInstrument(BadObjectName):
    reason = "unknown-instrument"


class CorruptFile(PermanentError):
    """The bytes are not a valid (compressed) FITS file: truncated, garbled, wrong headers."""

    reason = "corrupt-file"


class HeaderMismatch(PermanentError):
    """The FITS header names a different data id than the object name."""

    reason = "header-mismatch"


class NoIdentity(HeaderMismatch):
    """A header that cannot say which CCD it is (no instrument, observation or detector)."""

    reason = "no-identity"


class ForeignBucket(PermanentError):
    """A notification for an object in a bucket this deployment does not ingest from."""

    reason = "foreign-bucket"


class ObjectMissing(PermanentError):
    """An event refers to an object that no longer exists in the store."""

    reason = "object-missing"


class ChecksumConflict(PermanentError):
    """The same data id arrived again with different bytes: never silently overwritten."""

    reason = "checksum-conflict"


class ChecksumMismatch(PermanentError):
    """Bytes do not match the checksum that travelled with them (corruption in transit)."""

    reason = "checksum-mismatch"


class BadMetadata(PermanentError):
    """Custom object metadata the register function carries on is not what a producer writes."""

    reason = "bad-metadata"


class BadMessage(PermanentError):
    """A message does not decode: unknown schema fingerprint, wrong magic, invalid Avro."""

    reason = "bad-message"


class ServiceUnavailable(RetriableError):
    reason = "service-unavailable"


class UnstorableInput(PermanentError):
    """The registry cannot hold this input (value out of range or too long, integrity violation)."""

    reason = "unstorable-input"


class RequestRefused(PermanentError):
    """An HTTP request that is no delivery: answered 4xx with the reason, nothing quarantined."""

    reason = "request-refused"
    status = 400  # the HTTP answer


class NotADelivery(RequestRefused):
    """The body is not a Pub/Sub push envelope or a CloudEvent."""

    reason = "not-a-delivery"


class RequestTooLarge(RequestRefused):
    """The body is over the endpoint's size limit; refused before it is read."""

    reason = "request-too-large"
    status = 413


class NestingTooDeep(RequestRefused):
    """JSON nested deeper than any notification is; refused before it is parsed."""

    reason = "nesting-too-deep"


class ResourceExhausted(RetriableError):
    """A resource ran out (disk, quota, rate, connection slots, memory): an outage, retried,
    never quarantined. ``resource`` and ``where`` tell the operator what to free."""

    reason = "resource-exhausted"

    def __init__(self, message: str, resource: str = "", where: str = "") -> None:
        super().__init__(message)
        self.resource = resource
        self.where = where


class DiskFull(ResourceExhausted):
    """A filesystem is full or over its quota (ENOSPC, EDQUOT, SQLITE_FULL, SQLSTATE 53100)."""

    reason = "disk-full"


class DestinationFull(DiskFull):
    """The object store's filesystem (a local store's directory) or its storage is full."""

    reason = "destination-full"


class RegistryFull(DiskFull):
    """The registry's database cannot grow: PostgreSQL's or SQLite's disk is full."""

    reason = "registry-full"


class BusFull(DiskFull):
    """The message bus cannot store more: a Kafka broker's log directory is full."""

    reason = "bus-full"


class QuotaExceeded(ResourceExhausted):
    """A service quota is used up (GCS ``quotaExceeded``, gRPC RESOURCE_EXHAUSTED)."""

    reason = "quota-exceeded"


class RateLimited(ResourceExhausted):
    """A service asks to slow down (HTTP 429, GCS ``rateLimitExceeded``)."""

    reason = "rate-limited"


class ConnectionSlotsExhausted(ResourceExhausted):
    """The database takes no more connections (SQLSTATE 53300)."""

    reason = "connection-slots"


class OutOfMemory(ResourceExhausted):
    """Memory ran out (MemoryError, ENOMEM, SQLSTATE 53200, SQLITE_NOMEM)."""

    reason = "out-of-memory"
