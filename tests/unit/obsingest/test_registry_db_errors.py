"""Database errors classified by what retrying can do, and quarantine text every backend holds.

The PostgreSQL side of the same behaviour (real NUL, length and index-size refusals) is in
tests/integration/test_register_malformed.py.
"""

import sqlite3
from datetime import UTC, datetime
from typing import cast

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from obsingest.dataid import DataId
from obsingest.errors import UnstorableInput
from obsingest.registry import FileRecord, QuarantineEntry, Registry, RegistryUnavailable
from obsingest.registry.db_errors import Verdict, classify, describe, storable
from obsingest.settings import RegistrySettings

pytestmark = pytest.mark.unit

DID = DataId("LSSTComCam", 2026112200001, 4)


def wrapped(orig: Exception, base: type[Exception]) -> DBAPIError:
    """``orig`` as SQLAlchemy raises it from a driver call (the matching wrapper class)."""
    return cast(DBAPIError, DBAPIError.instance("INSERT ...", {}, orig, base))


@pytest.mark.parametrize(
    ("orig", "verdict"),
    [
        (psycopg.errors.StringDataRightTruncation("value too long"), Verdict.PERMANENT),
        (psycopg.errors.NumericValueOutOfRange("out of range"), Verdict.PERMANENT),
        (psycopg.errors.ProgramLimitExceeded("index row size 3456 exceeds"), Verdict.PERMANENT),
        (psycopg.errors.UniqueViolation("duplicate key"), Verdict.PERMANENT),
        (psycopg.errors.ForeignKeyViolation("fk"), Verdict.PERMANENT),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), Verdict.PERMANENT),
        (psycopg.errors.AdminShutdown("terminating connection"), Verdict.TRANSIENT),
        (psycopg.errors.SerializationFailure("could not serialize"), Verdict.TRANSIENT),
        (psycopg.errors.DeadlockDetected("deadlock"), Verdict.TRANSIENT),
        (psycopg.errors.TooManyConnections("slots reserved"), Verdict.TRANSIENT),
        (psycopg.errors.LockNotAvailable("lock"), Verdict.TRANSIENT),
        (psycopg.errors.DiskFull("no space"), Verdict.TRANSIENT),
        (psycopg.OperationalError("connection refused"), Verdict.TRANSIENT),
        (psycopg.errors.UndefinedTable("no such table"), Verdict.UNKNOWN),
    ],
)
def test_postgresql_errors_by_sqlstate(orig, verdict):
    assert classify(wrapped(orig, psycopg.Error)) is verdict


@pytest.mark.parametrize(
    ("orig", "verdict"),
    [
        (sqlite3.OperationalError("database is locked"), Verdict.TRANSIENT),
        (sqlite3.DataError("string or blob too big"), Verdict.PERMANENT),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), Verdict.PERMANENT),
        (sqlite3.ProgrammingError("closed database"), Verdict.UNKNOWN),
    ],
)
def test_sqlite_errors_by_dbapi_category(orig, verdict):
    assert classify(wrapped(orig, sqlite3.Error)) is verdict


def test_non_database_errors():
    assert classify(PoolTimeout("pool exhausted")) is Verdict.TRANSIENT
    surrogate = UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
    assert classify(surrogate) is Verdict.PERMANENT
    assert classify(KeyError("x")) is Verdict.UNKNOWN


def test_describe_keeps_the_driver_message_not_the_parameters():
    exc = wrapped(psycopg.errors.ProgramLimitExceeded("index row size 3456"), psycopg.Error)
    text = describe(exc)
    assert text.startswith("ProgramLimitExceeded [54000]: index row size 3456")
    assert "INSERT" not in text


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=48, max_value=2000))
def test_storable_text_has_no_nul_no_surrogate_and_fits(text, limit):
    safe = storable(text, limit)
    assert "\x00" not in safe
    safe.encode("utf-8")  # no lone surrogate
    assert len(safe) <= limit and len(safe.encode("utf-8")) <= 4 * limit
    if len(text) <= limit and "\x00" not in text and "\\" not in text:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return
        assert safe == text  # ordinary text is kept as it is


def test_shortened_text_stays_distinct_and_says_so():
    a, b = "gs://b/" + "x" * 3000 + "a", "gs://b/" + "x" * 3000 + "b"
    sa, sb = storable(a, 1024, max_bytes=1536), storable(b, 1024, max_bytes=1536)
    assert sa != sb and "3008 chars, sha256" in sa
    wide = storable("é" * 2000, 1024, max_bytes=1536)
    assert len(wide.encode("utf-8")) <= 1536
    assert storable("a\x00b", 64) == "a\\x00b" and storable("a\ud800", 64) == "a\\ud800"


def test_hostile_quarantine_text_is_stored_sanitised(registry):
    entries = [
        QuarantineEntry("file:///s/raw/a\x00b", "bad-object-name", "name 'a\x00b'"),
        QuarantineEntry("file:///s/quarantine/a", "r" * 300, "reason from metadata"),
        QuarantineEntry("gs://b/" + "z" * 5000, "bad-object-name", "m" * 100_000),
        QuarantineEntry("pubsub:\ud800", "bad-message", "surrogate \udfff", checksum="c\x00"),
    ]
    for entry in entries:
        registry.quarantine(entry)
        registry.quarantine(entry)  # a repeat is counted, not duplicated
    rows = registry.quarantined()
    assert len(rows) == 4 and all(row["occurrences"] == 2 for row in rows)
    for row in rows:
        assert "\x00" not in row["object_uri"] + row["message"] + row["checksum"]
        assert len(row["reason"]) <= 64 and len(row["object_uri"]) <= 1024
        assert len(row["message"]) <= 4096 and row["reason"]
    assert rows[0]["object_uri"] == "file:///s/raw/a\\x00b"
    assert rows[3]["object_uri"] == "pubsub:\\ud800"


def _file(uri="file:///a"):
    return FileRecord(DID, uri, 100, "crc32c:0000abcd", readout_time=datetime(2026, 11, 22, tzinfo=UTC))


def test_a_permanent_database_error_is_not_retried(registry, monkeypatch):
    calls = {"n": 0}

    def refuses(conn, record, exposure):
        calls["n"] += 1
        raise wrapped(psycopg.errors.ProgramLimitExceeded("index row too big"), psycopg.Error)

    monkeypatch.setattr(registry, "_register", refuses)
    with pytest.raises(UnstorableInput, match="ProgramLimitExceeded") as info:
        registry.register(_file())
    assert calls["n"] == 1 and not info.value.retriable
    assert info.value.reason == "unstorable-input"


def test_a_transient_database_error_is_still_retried_then_unavailable(tmp_path, monkeypatch):
    reg = Registry.open(
        RegistrySettings(url=f"sqlite:///{tmp_path / 't.sqlite3'}", retry_attempts=3, retry_base_delay=0.001)
    )
    calls = {"n": 0}

    def down(conn, record, exposure):
        calls["n"] += 1
        raise wrapped(psycopg.errors.AdminShutdown("terminating connection"), psycopg.Error)

    monkeypatch.setattr(reg, "_register", down)
    with pytest.raises(RegistryUnavailable):
        reg.register(_file())
    reg.close()
    assert calls["n"] == 3


def test_a_bug_is_neither_retried_nor_disguised(registry, monkeypatch):
    def broken(conn, record, exposure):
        raise KeyError("column")

    monkeypatch.setattr(registry, "_register", broken)
    with pytest.raises(KeyError):
        registry.register(_file())
