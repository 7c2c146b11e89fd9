"""Resource exhaustion is classified once, from what each driver and service says, and is always
a retriable outage with its reason, never a verdict on the input (issue 21)."""

from __future__ import annotations

import errno
import pickle
import sqlite3

import psycopg
import pytest
from google.api_core import exceptions as api_exceptions
from sqlalchemy.exc import DBAPIError, OperationalError

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
    RetriableError,
)
from obsingest.exhaustion import Exhaustion, as_exhausted, exhausted, exhaustion_of, one_line
from obsingest.metrics import REASONS
from obsingest.retry import RetriesExhausted

pytestmark = pytest.mark.unit


def pg_error(sqlstate: str, message: str) -> Exception:
    """A psycopg error of ``sqlstate`` as the server raises it, wrapped as SQLAlchemy does."""
    orig = psycopg.errors.lookup(sqlstate)(message)
    return DBAPIError.instance("INSERT ...", {}, orig, psycopg.Error)


def sqlite_error(code: int, message: str) -> Exception:
    orig = sqlite3.OperationalError(message)
    orig.sqlite_errorcode = code
    return DBAPIError.instance("INSERT ...", {}, orig, sqlite3.Error)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), Exhaustion.DISK_FULL),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), Exhaustion.DISK_FULL),
        (OSError(errno.ENOMEM, "Cannot allocate memory"), Exhaustion.MEMORY),
        (MemoryError(), Exhaustion.MEMORY),
        (pg_error("53100", "could not extend file base/1/2: No space left"), Exhaustion.DISK_FULL),
        (pg_error("53200", "out of memory"), Exhaustion.MEMORY),
        (pg_error("53300", "sorry, too many clients already"), Exhaustion.CONNECTION_SLOTS),
        (
            OperationalError(
                "connect",
                {},
                psycopg.OperationalError(
                    "connection failed: FATAL:  remaining connection slots are reserved for "
                    "roles with the SUPERUSER attribute"
                ),
            ),
            Exhaustion.CONNECTION_SLOTS,
        ),
        (sqlite_error(13, "database or disk is full"), Exhaustion.DISK_FULL),
        (sqlite_error(7, "out of memory"), Exhaustion.MEMORY),
        (sqlite3.OperationalError("database or disk is full"), Exhaustion.DISK_FULL),
        (api_exceptions.TooManyRequests("slow down"), Exhaustion.RATE_LIMIT),
        (api_exceptions.Forbidden("x", errors=[{"reason": "rateLimitExceeded"}]), Exhaustion.RATE_LIMIT),
        (api_exceptions.Forbidden("The project exceeded quota"), Exhaustion.QUOTA),
        (api_exceptions.from_http_status(507, "Insufficient Storage"), Exhaustion.DISK_FULL),
        (RuntimeError("KafkaError{code=KAFKA_STORAGE_ERROR,val=56}"), Exhaustion.DISK_FULL),
    ],
    ids=repr,
)
def test_what_ran_out_is_read_from_each_driver_and_service(exc, kind) -> None:
    assert exhaustion_of(exc) is kind


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.EIO, "Input/output error"),
        FileNotFoundError(errno.ENOENT, "No such file"),
        pg_error("22001", "value too long for type character varying(64)"),
        pg_error("57P01", "terminating connection due to administrator command"),
        sqlite_error(5, "database is locked"),
        api_exceptions.ServiceUnavailable("backend error"),
        api_exceptions.Forbidden("caller does not have storage.objects.create access"),
        ValueError("bug"),
    ],
    ids=repr,
)
def test_other_failures_are_not_exhaustion(exc) -> None:
    assert exhaustion_of(exc) is None
    assert as_exhausted(exc, "destination", "/x") is None


def test_the_wrapper_text_is_not_read_only_the_drivers_error() -> None:
    """SQLAlchemy's message repeats the statement's parameters: the input's own words must not
    turn a refusal of the input into an outage."""
    orig = psycopg.errors.StringDataRightTruncation("value too long")
    exc = DBAPIError.instance("INSERT ...", {"name": "out of memory"}, orig, psycopg.Error)
    assert "out of memory" in str(exc)
    assert exhaustion_of(exc) is None


def test_causes_are_followed_through_retries() -> None:
    try:
        try:
            raise api_exceptions.TooManyRequests("rate")
        except Exception as last:
            raise RetriesExhausted("gcs put: gave up", "http-429", 6, last) from last
    except RetriesExhausted as exc:
        assert exhaustion_of(exc) is Exhaustion.RATE_LIMIT
        error = as_exhausted(exc, "destination", "gs://bucket")
    assert isinstance(error, RateLimited) and error.reason == "rate-limited"


@pytest.mark.parametrize(
    ("kind", "resource", "cls", "reason"),
    [
        (Exhaustion.DISK_FULL, "destination", DestinationFull, "destination-full"),
        (Exhaustion.DISK_FULL, "store", DestinationFull, "destination-full"),
        (Exhaustion.DISK_FULL, "registry", RegistryFull, "registry-full"),
        (Exhaustion.DISK_FULL, "bus", BusFull, "bus-full"),
        (Exhaustion.DISK_FULL, "disk", DiskFull, "disk-full"),
        (Exhaustion.QUOTA, "destination", QuotaExceeded, "quota-exceeded"),
        (Exhaustion.RATE_LIMIT, "destination", RateLimited, "rate-limited"),
        (Exhaustion.CONNECTION_SLOTS, "registry", ConnectionSlotsExhausted, "connection-slots"),
        (Exhaustion.MEMORY, "registry", OutOfMemory, "out-of-memory"),
    ],
)
def test_each_kind_and_resource_has_its_retriable_error_and_reason(kind, resource, cls, reason) -> None:
    error = exhausted(kind, resource, "/data/store", "OSError: [Errno 28] No space left")
    assert type(error) is cls and error.reason == reason
    assert error.retriable and isinstance(error, RetriableError)
    assert reason in REASONS
    assert str(error).startswith(f"{resource} /data/store: ")
    assert exhaustion_of(error) is kind  # classified once, stays classified
    copy = pickle.loads(pickle.dumps(error))  # it crosses the edge's worker pipe intact
    assert (type(copy), copy.reason, copy.resource) == (cls, reason, resource)
    assert copy.where == "/data/store"


def test_one_line_names_the_resource_and_the_path() -> None:
    line = one_line(OSError(errno.ENOSPC, "No space left on device", "/data/demo/arrivals.avro"))
    assert line == "disk /data/demo/arrivals.avro: no space left (No space left on device)"
    memory = one_line(MemoryError())
    assert memory is not None and memory.startswith("memory ")
    assert one_line(ValueError("bug")) is None
    error = DestinationFull("destination /x: no space left", "destination", "/x")
    assert one_line(error) == "destination /x: no space left"


def test_an_exhausted_error_is_never_permanent() -> None:
    for cls in (ResourceExhausted, DiskFull, DestinationFull, RateLimited, OutOfMemory):
        assert cls("x").retriable


def test_a_brokers_full_disk_and_client_quota_are_read_from_kafkas_error_names() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from obsingest.exhaustion import kafka_exhaustion

    storage = KafkaError(KafkaError.KAFKA_STORAGE_ERROR)
    assert kafka_exhaustion(storage.name()) is Exhaustion.DISK_FULL
    assert exhaustion_of(KafkaException(storage)) is Exhaustion.DISK_FULL
    quota = KafkaError(KafkaError.THROTTLING_QUOTA_EXCEEDED)
    assert kafka_exhaustion(quota.name()) is Exhaustion.QUOTA
    assert kafka_exhaustion(KafkaError(KafkaError._MSG_TIMED_OUT).name()) is None
    error = exhausted(Exhaustion.DISK_FULL, "bus", "kafka topic ccd-chunks", storage.str())
    assert isinstance(error, BusFull) and error.reason == "bus-full"
