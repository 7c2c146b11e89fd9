"""The malformed-notification corpus replayed against the real register function.

Both entry points are served by functions-framework (gunicorn) in subprocesses, on the GCS
emulator, PostgreSQL and a Pub/Sub arrivals topic. Every request of the corpus (wrong types,
missing fields, NUL bytes, over-long names and reasons, deep nesting, bad base64, non-JSON,
wrong event types, foreign buckets, huge bodies, ...) must be answered 2xx or 4xx, never 5xx;
every one expected to be quarantined has its own record with its reason; the function's memory
stays flat under four concurrent 100 MB bodies (413 without reading them); and the good CCD
sent in between is registered exactly once.

Also here: the registry's database-error classification and quarantine sanitising on a real
PostgreSQL, compared with SQLite.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from obsingest.errors import UnstorableInput
from obsingest.messages import utcnow
from obsingest.registry import FileRecord, QuarantineEntry, Registry
from obsingest.registry.db_errors import storable
from obsingest.settings import BusSettings, RegistrySettings
from obsingest.store.base import StoredObject
from obsingest.store.gcs import GcsSettings, GcsStore
from producers.uploader import DirectUploader
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService
from tests.integration.malformed_corpus import CE_JSON, GOOD, MB, Blank, Case, chunks, corpus
from tests.integration.test_direct_path import function_env, small_ccd

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class ServedFunction(FunctionProcess):
    """One entry point served by functions-framework (gunicorn, one worker) in a subprocess."""

    def peak_rss(self) -> int:
        """Highest resident memory (bytes) any process of the server reached so far."""
        assert self.proc is not None
        peaks = []
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            status = Path(f"/proc/{pid}/status").read_text()
            kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
            peaks.append(int(kb) * 1024)
        return max(peaks)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


# -- fixtures -----------------------------------------------------------------------------------
@dataclass
class Deployment:
    good: StoredObject
    registry: Registry
    push: ServedFunction
    ce: ServedFunction

    def send(self, case: Case) -> requests.Response:
        url = (self.push if case.endpoint == "push" else self.ce).url
        body = case.body() if callable(case.body) else case.body
        return requests.request(case.method, url, data=body, headers=case.headers, timeout=120)


@pytest.fixture(scope="module")
def deployment(
    gcs: GcsService,
    pubsub: PubSubService,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    bucket = gcs.new_bucket("malformed")
    arrivals = pubsub.new_topic("arrivals").rsplit("/", 1)[1]
    store = GcsStore(bucket, settings=GcsSettings(project=pubsub.project_id))
    good = DirectUploader(store).send(GOOD, small_ccd(GOOD.exposure, GOOD.detector), utcnow()).obj
    registry_url = postgres_server.create_database("malformed")
    registry = Registry.open(RegistrySettings(url=registry_url))
    env = function_env(pubsub.project_id, BusSettings(arrivals_topic=arrivals), bucket, registry_url)
    logs = tmp_path_factory.mktemp("malformed")
    one = {"WORKERS": "1", **env}
    servers = [
        ServedFunction(one, logs / "push.log", target="on_push", signature="http"),
        ServedFunction(one, logs / "ce.log", target="on_object_finalized", signature="cloudevent"),
    ]
    try:
        for server in servers:
            server.start()
        yield Deployment(good, registry, *servers)
    finally:
        for server in servers:
            server.stop()
        registry.close()
        postgres_server.drop_database(registry_url)


# -- tests --------------------------------------------------------------------------------------
def test_every_malformed_request_is_answered_and_accounted_for(deployment: Deployment) -> None:
    cases = corpus(deployment.good)
    assert len(cases) >= 93 and len({c.name for c in cases}) == len(cases)
    wrong = []
    for case in cases:
        response = deployment.send(case)
        status, text = response.status_code, response.text[:300]
        if case.expect.startswith("4xx:"):
            ok = status == int(case.expect[4:])
        elif case.endpoint == "ce":
            ok = status == 200
        elif case.expect.startswith("q:"):
            ok = status == 200 and text.startswith("quarantined")
        else:
            ok = status == 200 and text.startswith(case.expect)
        if not ok:
            wrong.append(f"{case.name[:40]}: expected {case.expect[:40]!r}, got {status} {text!r}")
    assert not wrong, "\n".join(wrong)

    rows = deployment.registry.quarantined()
    expected = Counter(storable(c.expect[2:], 64) for c in cases if c.expect.startswith("q:"))
    assert Counter(row["reason"] for row in rows) == expected
    assert all(row["occurrences"] == 1 and row["message"] for row in rows)
    uris = {row["object_uri"] for row in rows}
    assert "pubsub:p-data-not-base64" in uris and "cloudevent:c-type" in uris
    assert f"gs://{deployment.good.bucket}/raw/s3\\x00.fits.fz" in uris
    assert f"someone-elses-bucket/{deployment.good.name}" in uris

    [dataset] = deployment.registry.datasets()
    assert (dataset["instrument"], dataset["exposure"], dataset["detector"]) == (
        GOOD.instrument,
        GOOD.exposure,
        GOOD.detector,
    )


def test_huge_bodies_are_refused_unread_with_flat_memory(deployment: Deployment) -> None:
    before = {s: s.peak_rss() for s in (deployment.push, deployment.ce)}
    big = [
        Case("m-length-1", "push", "4xx:413", lambda: Blank(100 * MB)),
        Case("m-length-2", "push", "4xx:413", lambda: Blank(100 * MB)),
        Case("m-chunked-1", "push", "4xx:413", lambda: chunks(100 * MB)),
        Case("m-chunked-2", "push", "4xx:413", lambda: chunks(100 * MB)),
        Case("m-ce", "ce", "4xx:413", lambda: Blank(100 * MB), CE_JSON),
    ]
    with ThreadPoolExecutor(len(big)) as pool:
        statuses = list(pool.map(lambda c: deployment.send(c).status_code, big))
    assert statuses == [413] * len(big)
    for server, peak in before.items():
        grown = server.peak_rss() - peak
        assert grown < 64 * MB, f"{server.url}: peak memory grew {grown / MB:.0f} MiB"
    assert deployment.registry.count_datasets() <= 1


def _entries() -> list[QuarantineEntry]:
    return [
        QuarantineEntry("gs://b/raw/a\x00b", "bad-object-name", "name 'a\x00b'", "crc32c:1\x00"),
        QuarantineEntry("gs://b/quarantine/a", "r" * 300, "reason from metadata"),
        QuarantineEntry("gs://b/" + os.urandom(2000).hex(), "bad-object-name", "m" * 100_000),
        QuarantineEntry("pubsub:\ud800", "bad-message", "lone surrogate \udfff"),
    ]


def test_quarantine_text_is_stored_alike_on_postgresql_and_sqlite(postgres: str, tmp_path: Path) -> None:
    """NUL, over-long reasons, 4,000-byte URIs (over PostgreSQL's 2,704-byte index row) and
    lone surrogates: the same sanitised row on both backends, none of them an error."""
    tables, entries = [], _entries()
    for url in (postgres, f"sqlite:///{tmp_path / 'r.sqlite3'}"):
        registry = Registry.open(RegistrySettings(url=url, retry_attempts=1))
        for entry in entries:
            registry.quarantine(entry)
        keys = ("object_uri", "reason", "message", "checksum", "occurrences")
        tables.append([tuple(row[k] for k in keys) for row in registry.quarantined()])
        registry.close()
    assert tables[0] == tables[1] and len(tables[0]) == 4


def test_values_postgresql_refuses_are_permanent_not_retried(postgres: str) -> None:
    """Before: ProgramLimitExceeded and friends were "transient" and looped to the DLQ."""
    registry = Registry.open(RegistrySettings(url=postgres, retry_attempts=5))
    record = FileRecord(GOOD, "gs://b/x", 1, "crc32c:00000000", md5="m" * 100, readout_time=datetime.now(UTC))
    started = time.monotonic()
    with pytest.raises(UnstorableInput, match="StringDataRightTruncation") as info:
        registry.register(record)
    assert not info.value.retriable and time.monotonic() - started < 5
    assert registry.count_datasets() == 0
    registry.close()


def test_values_postgresql_refuses_are_permanent_on_the_one_statement_path_too(postgres: str) -> None:
    """Once its exposure is known, a CCD is registered by one autocommit statement: its driver
    error was marked connection-invalidated, so every refusal (SQLSTATE 22, 23, 54) was classed
    transient, retried and answered 503 until dead-lettered, never quarantined."""
    from dataclasses import replace

    from obsingest.registry import OutboxMessage

    def announce(registration):
        return OutboxMessage("ccd-arrivals", b"event", key="k")

    registry = Registry.open(RegistrySettings(url=postgres, retry_attempts=5))
    first = FileRecord(GOOD, "gs://b/x", 1, "crc32c:00000000", readout_time=datetime.now(UTC))
    assert registry.register(first, announce=announce).created  # its run and exposure now known
    other = replace(first, data_id=replace(GOOD, detector=GOOD.detector + 1), uri="gs://b/y", md5="m" * 100)
    started = time.monotonic()
    with pytest.raises(UnstorableInput, match="StringDataRightTruncation") as info:
        registry.register(other, announce=announce)
    assert not info.value.retriable and time.monotonic() - started < 5
    assert registry.count_datasets() == 1
    registry.close()


def test_an_exposure_row_gone_under_a_process_that_wrote_it_is_written_again(postgres: str) -> None:
    """The one-statement path trusts that this process committed the run and exposure rows; a
    database restored from a backup taken before them refuses its dataset (a foreign key): the
    CCD is registered by the full path, which writes them again, not quarantined or retried."""
    from dataclasses import replace

    from sqlalchemy import delete

    from obsingest.registry import OutboxMessage, tables
    from obsingest.registry.facility_tables import arrival_outbox

    def announce(registration):
        return OutboxMessage("ccd-arrivals", b"event", key="k")

    registry = Registry.open(RegistrySettings(url=postgres, retry_attempts=5))
    first = FileRecord(GOOD, "gs://b/x", 1, "crc32c:00000000", readout_time=datetime.now(UTC))
    assert registry.register(first, announce=announce).created
    with registry.engine.begin() as conn:  # the restore: nothing of the exposure is left
        for table in (arrival_outbox, tables.datastore_record, tables.dataset, tables.exposure):
            conn.execute(delete(table))
    other = replace(first, data_id=replace(GOOD, detector=GOOD.detector + 1), uri="gs://b/y")
    assert registry.register(other, announce=announce).created
    assert registry.count_datasets() == 1 and registry.exposure(GOOD.instrument, GOOD.exposure)
    registry.close()
