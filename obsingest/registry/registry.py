"""The dataset registry adapter: the one place where idempotency is decided.

``register`` inserts dimension records, dataset and datastore record in one transaction with
INSERT ... ON CONFLICT DO NOTHING, so repeated or concurrent deliveries give one row and a killed
worker leaves nothing half-written. For an existing data id the stored checksum decides: same
bytes return the existing dataset, different bytes raise ChecksumConflict (quarantined).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, bindparam, func, select

from obsingest.dataid import DataId, dataset_id
from obsingest.errors import ChecksumConflict, UnstorableInput
from obsingest.exhaustion import as_exhausted
from obsingest.registry import db_errors, tables
from obsingest.registry.audit import EngineQueries, RegistryAudit
from obsingest.registry.db_errors import RegistryUnavailable as RegistryUnavailable  # re-exported
from obsingest.registry.engine import make_engine
from obsingest.registry.migrations import migrate
from obsingest.registry.outbox import ArrivalOutbox, OutboxMessage, as_uuid, insert_row, outbox_values
from obsingest.registry.prepared import autocommit_rows, register_at_once_sql
from obsingest.retry import RetriesExhausted, RetryPolicy, Transient, call_with_retries
from obsingest.settings import RegistrySettings, run_name
from obsingest.timescales import as_utc

T = TypeVar("T")
_READ_BATCH = 1000  # rows a listing fetches at a time


@dataclass(frozen=True)
class ExposureRecord:
    """The exposure dimension record, as the raw headers give it (``registry.headers``); the
    fields are the Butler's exposure record's (``obs_start``/``obs_end``: its timespan)."""

    instrument: str
    exposure: int
    day_obs: int
    obs_start: datetime | None = None
    exposure_time: float | None = None
    physical_filter: str | None = None
    obs_id: str | None = None
    group_name: str | None = None
    seq_num: int | None = None
    band: str | None = None
    observation_type: str | None = None
    observation_reason: str | None = None
    dark_time: float | None = None
    obs_end: datetime | None = None
    tracking_ra: float | None = None
    tracking_dec: float | None = None
    sky_angle: float | None = None
    azimuth: float | None = None
    zenith_angle: float | None = None
    science_program: str | None = None
    target_name: str | None = None
    has_simulated: bool | None = None
    can_see_sky: bool | None = None
    #: what the header translation warned about (cards defaulted), kept with the record
    header_warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileRecord:
    """One stored file to register."""

    data_id: DataId
    uri: str
    size: int
    checksum: str
    md5: str = ""
    readout_time: datetime | None = None
    compressed_time: datetime | None = None
    stored_time: datetime | None = None
    transport: str = "direct"


@dataclass(frozen=True)
class Registration:
    dataset_id: uuid.UUID
    dataset_type: str
    run: str
    created: bool  # False: this file was already registered (re-delivery)
    registered_time: datetime
    uri: str
    #: the arrivals-outbox row written with the dataset (None: no announcement was asked for)
    outbox_id: int | None = None


#: Builds the announcement of a new dataset, written to the outbox in the registering transaction.
Announcer = Callable[[Registration], OutboxMessage]

#: Seconds the registering process holds the new outbox row for its immediate publish.
OUTBOX_LEASE_SECONDS = 30.0


@dataclass(frozen=True)
class QuarantineEntry:
    object_uri: str
    reason: str
    message: str
    checksum: str = ""
    data_id: DataId | None = None
    size: int | None = None


#: every optional field of ExposureRecord: an upsert fills those still unknown
_EXPOSURE_FIELDS = tuple(f.name for f in fields(ExposureRecord))[3:]


def _column_value(value: Any) -> Any:
    """A field as its column holds it: UTC times; header warnings a JSON list, NULL if none."""
    if isinstance(value, tuple):
        return json.dumps(list(value)) if value else None
    return as_utc(value) if isinstance(value, datetime) else value


class Registry(EngineQueries):
    """Registry on a SQLAlchemy engine (SQLite or PostgreSQL); every transaction ``_retrying``."""

    def __init__(self, engine: Engine, settings: RegistrySettings) -> None:
        super().__init__(engine, self._retrying)
        self.settings = settings
        # built once: SQLAlchemy's compiled cache then serves every call
        self._insert_run = self._insert(tables.run).on_conflict_do_nothing()
        # migration 2 seeds ``raw`` only: a configured dataset type is added with its first run
        self._insert_dataset_type = (
            self._insert(tables.dataset_type)
            .values(
                name=settings.dataset_type,
                dimensions="instrument,exposure,detector",
                storage_class="Exposure",
            )
            .on_conflict_do_nothing()
        )
        self._insert_dataset = (
            self._insert(tables.dataset)
            .on_conflict_do_nothing()
            # RETURNING, not rowcount: psycopg 3 under SQLAlchemy 2.1 reports rowcount -1 here.
            .returning(tables.dataset.c.id)
        )
        self._insert_datastore = self._insert(tables.datastore_record)
        self._select_existing = (
            select(tables.dataset.c.ingest_time, tables.datastore_record)
            .join(tables.datastore_record, tables.datastore_record.c.dataset_id == tables.dataset.c.id)
            .where(tables.dataset.c.id == bindparam("ds_id"))
        )
        upsert = self._insert(tables.exposure)
        self._upsert_exposure_stmt = upsert.on_conflict_do_update(
            index_elements=[tables.exposure.c.instrument, tables.exposure.c.id],
            set_={
                name: func.coalesce(getattr(tables.exposure.c, name), getattr(upsert.excluded, name))
                for name in _EXPOSURE_FIELDS
            },
        )
        # dimension rows this process saw committed (never deleted): a repeat skips their upserts
        self._known_runs: set[str] = set()
        self._known_exposures: dict[tuple[str, int], frozenset[str]] = {}
        self._known_lock = threading.Lock()

    @classmethod
    def open(cls, settings: RegistrySettings, migrate_schema: bool = True) -> Registry:
        """The SQLite or PostgreSQL registry at ``settings.url`` (any backend: ``open_registry``)."""
        if settings.url.startswith("butler:") and cls is Registry:
            raise ValueError(f"{settings.url!r} names a Butler repository: open it with open_registry()")
        registry = cls(make_engine(settings), settings)
        if migrate_schema:
            registry._retrying(lambda: migrate(registry.engine))
        return registry

    def close(self) -> None:
        self.engine.dispose()

    def _retrying(self, fn: Callable[[], T]) -> T:
        """Retry transient database failures (backoff with jitter, bounded in time: the caller's
        redelivery is the next retry); a failure the input causes is UnstorableInput at once."""

        def attempt(_remaining: float) -> T:
            try:
                return fn()
            except Exception as exc:
                if db_errors.classify(exc) is db_errors.Verdict.PERMANENT:
                    raise UnstorableInput(
                        f"the registry cannot store this input: {db_errors.describe(exc)}"
                    ) from exc
                raise

        def classify(exc: BaseException) -> Transient | None:
            transient = db_errors.classify(exc) is db_errors.Verdict.TRANSIENT
            return Transient("database") if transient else None

        s = self.settings
        # the first wait is up to 2 x retry_base_delay, then doubling without a cap
        policy = RetryPolicy(s.retry_attempts, 2 * s.retry_base_delay, math.inf, deadline=s.retry_deadline)
        try:
            return call_with_retries(attempt, classify, policy, what="registry")
        except RetriesExhausted as gave_up:
            if gave_up.kind != "database":  # a retry inside ``fn`` gave up: not ours to say
                raise
            last, attempts = gave_up.last, gave_up.attempts
        where = self.engine.url.render_as_string(hide_password=True)
        raise as_exhausted(last, "registry", where) or RegistryUnavailable(
            f"registry unavailable after {attempts} attempts: {last}"
        ) from last

    def upsert_exposure(self, record: ExposureRecord) -> None:
        """Insert the exposure dimension record, filling fields that are still unknown."""
        self._tx(lambda c: self._upsert_exposure(c, record))

    def _upsert_exposure(self, conn: Connection, record: ExposureRecord) -> None:
        values = {name: _column_value(getattr(record, name)) for name in _EXPOSURE_FIELDS}
        key = {"instrument": record.instrument, "id": record.exposure, "day_obs": record.day_obs}
        conn.execute(self._upsert_exposure_stmt, key | values)

    def arriving(self) -> AbstractContextManager[None]:
        """This thread prepares a registration and calls ``register`` inside the block (or gives
        up): a group-committing registry (Butler) lets its next batch wait for it."""
        return nullcontext()

    def register(
        self, record: FileRecord, exposure: ExposureRecord | None = None, announce: Announcer | None = None
    ) -> Registration:
        """Register one file; idempotent for the same bytes, ChecksumConflict for different ones.
        ``announce``: a new dataset's announcement, written to the outbox in the same transaction."""
        data_id = record.data_id
        exposure = exposure or ExposureRecord(data_id.instrument, data_id.exposure, data_id.day_obs)
        run = run_name(self.settings.run, data_id.instrument)
        known = run in self._known_runs and not self._needs_exposure_upsert(exposure)
        if self._postgres and announce is not None and known:  # dimension rows committed
            try:
                at_once = self._retrying(lambda: self._register_at_once(record, announce))
            except UnstorableInput:  # its dimension rows gone (a restore)? the full path decides
                self._forget(run, exposure)
                at_once = None
            if at_once is not None:
                return at_once
            # the dataset exists: the transaction below compares its bytes (or finds it)
        try:
            result = self._rows_written_if_gone(
                lambda: self._tx(
                    lambda c: self._with_outbox_row(c, self._register(c, record, exposure), announce)
                ),
                [(run, exposure)],
            )
        except ChecksumConflict:
            # The transaction rolled back: the run row existed before (the conflicting dataset
            # references it), but this call's exposure fields may not have been written.
            with self._known_lock:
                self._known_runs.add(run)
            raise
        except Exception:
            self._forget(run, exposure)
            raise
        self._remember(run, exposure)
        return result

    def _register_at_once(self, record: FileRecord, announce: Announcer) -> Registration | None:
        """PostgreSQL, dimension rows committed: the new dataset, datastore record and outbox row
        in one atomic statement (``prepared.register_at_once_sql``); None when the dataset exists."""
        registration = self._planned(record)
        ds_id, now = registration.dataset_id, registration.registered_time
        rows = (
            _dataset_values(registration, record.data_id),
            _datastore_values(ds_id, record),
            outbox_values(ds_id, announce(registration), now, OUTBOX_LEASE_SECONDS),
        )
        sql = register_at_once_sql(*(tuple(row) for row in rows))
        params = {key: value for row in rows for key, value in row.items()}
        [(inserted, row_id)] = autocommit_rows(self.engine, sql, params)
        if inserted is None:
            return None
        return dataclasses.replace(registration, outbox_id=int(row_id))

    def _exposure_fields(self, record: ExposureRecord) -> frozenset[str]:
        return frozenset(n for n in _EXPOSURE_FIELDS if getattr(record, n) not in (None, ()))

    def _needs_exposure_upsert(self, record: ExposureRecord) -> bool:
        """False when this process already committed the row with every field ``record`` has
        (the upsert only fills unknown fields, so it would change nothing)."""
        with self._known_lock:
            known = self._known_exposures.get((record.instrument, record.exposure))
        return known is None or not self._exposure_fields(record) <= known

    def _remember(self, run: str, record: ExposureRecord) -> None:
        key = (record.instrument, record.exposure)
        with self._known_lock:
            self._known_runs.add(run)
            if len(self._known_exposures) > 10_000:
                self._known_exposures.clear()
            known = self._known_exposures.get(key, frozenset())
            self._known_exposures[key] = known | self._exposure_fields(record)

    def _rows_written_if_gone(self, attempt: Callable[[], T], rows: list[tuple[str, ExposureRecord]]) -> T:
        """``attempt()``; refused as unstorable input when it skipped dimension rows of ``rows``
        this process committed (gone since: a restore), it forgets them and tries once more,
        writing them; refused again, it is the input's fault."""
        skipped = any(run in self._known_runs or not self._needs_exposure_upsert(e) for run, e in rows)
        try:
            return attempt()
        except UnstorableInput:
            if not skipped:
                raise
            for run, exposure in rows:
                self._forget(run, exposure)
            return attempt()

    def _forget(self, run: str, record: ExposureRecord) -> None:
        with self._known_lock:
            self._known_runs.discard(run)
            self._known_exposures.pop((record.instrument, record.exposure), None)

    def _write_dimensions(self, conn: Connection, run: str, exposure: ExposureRecord) -> None:
        """The run and exposure rows a dataset needs, unless this process committed them."""
        if run not in self._known_runs:
            conn.execute(self._insert_dataset_type)
            conn.execute(self._insert_run, {"name": run})
        if self._needs_exposure_upsert(exposure):
            self._upsert_exposure(conn, exposure)

    def _insert_new(
        self, conn: Connection, fresh: dict[uuid.UUID, tuple[FileRecord, Registration]]
    ) -> set[uuid.UUID]:
        """Insert the datasets of ``fresh`` (believed new) and their datastore records, two
        statements for the batch; returns the ids inserted (the others: ``_register`` one by one)."""
        if not fresh:
            return set()
        rows = [_dataset_values(reg, rec.data_id) for rec, reg in fresh.values()]
        inserted = {as_uuid(row[0]) for row in conn.execute(self._insert_dataset, rows)}
        records = [_datastore_values(ds_id, rec) for ds_id, (rec, _) in fresh.items() if ds_id in inserted]
        if records:
            conn.execute(self._insert_datastore, records)
        return inserted

    def _register(
        self, conn: Connection, record: FileRecord, exposure: ExposureRecord, dimensions_written: bool = False
    ) -> Registration:
        registration = self._planned(record)
        ds_id = registration.dataset_id
        if not dimensions_written:
            self._write_dimensions(conn, registration.run, exposure)
        inserted = conn.execute(self._insert_dataset, _dataset_values(registration, record.data_id)).first()
        if inserted is not None:
            conn.execute(self._insert_datastore, _datastore_values(ds_id, record))
            return registration
        row = conn.execute(self._select_existing, {"ds_id": ds_id}).mappings().one()
        if conflict := checksum_conflict(record, row):
            raise conflict
        registered = as_utc(row["ingest_time"]) or registration.registered_time
        return dataclasses.replace(registration, created=False, registered_time=registered, uri=row["uri"])

    def _planned(self, record: FileRecord) -> Registration:
        """``record``'s registration as a new dataset, now."""
        dtype = self.settings.dataset_type
        run = run_name(self.settings.run, record.data_id.instrument)
        ds_id = dataset_id(record.data_id, dtype, run)
        return Registration(ds_id, dtype, run, True, datetime.now(UTC), record.uri)

    def _with_outbox_row(
        self, conn: Connection, registration: Registration, announce: Announcer | None
    ) -> Registration:
        """In the registering transaction: a new dataset gets its outbox row, or neither exists."""
        if announce is None or not registration.created:
            return registration
        reg, message = registration, announce(registration)
        row_id = insert_row(conn, reg.dataset_id, message, reg.registered_time, OUTBOX_LEASE_SECONDS)
        return dataclasses.replace(reg, outbox_id=row_id)

    @cached_property
    def outbox(self) -> ArrivalOutbox:
        return ArrivalOutbox(self.engine, self._retrying)

    @cached_property
    def audit(self) -> RegistryAudit:
        return RegistryAudit(self.engine, self._retrying)

    def quarantine(self, entry: QuarantineEntry) -> None:
        """Record a refused input; a repeat of (object, reason, checksum) is counted once. Text is
        made storable first: it is untrusted, and why an input was refused must be kept."""
        now = datetime.now(UTC)
        q = tables.quarantine
        stmt = self._insert(q).values(
            # the unique key (uri, reason, checksum) stays under PostgreSQL's 2,704-byte
            # index row limit: 1,536 + 4 * 64 + 64 bytes of text
            object_uri=db_errors.storable(entry.object_uri, 1024, max_bytes=1536),
            reason=db_errors.storable(entry.reason, 64),
            message=db_errors.storable(entry.message, 4096),
            checksum=db_errors.storable(entry.checksum, 64, max_bytes=64),
            **{key: getattr(entry.data_id, key, None) for key in ("instrument", "exposure", "detector")},
            size=entry.size,
            first_seen=now,
            last_seen=now,
            occurrences=1,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[q.c.object_uri, q.c.reason, q.c.checksum],
            set_={"last_seen": now, "occurrences": q.c.occurrences + 1},
        )
        self._tx(lambda c: c.execute(stmt))

    def datasets(self, instrument: str | None = None, exposure: int | None = None) -> list[dict[str, Any]]:
        return list(self.iter_datasets(instrument, exposure))

    def iter_datasets(
        self, instrument: str | None = None, exposure: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The registered datasets with their datastore records, in data id order, fetched in
        batches (a server-side cursor on PostgreSQL): memory stays flat with history."""
        d, r = tables.dataset, tables.datastore_record
        query = select(d, r.c.uri, r.c.size, r.c.checksum, r.c.transport, r.c.readout_time).join(
            r, r.c.dataset_id == d.c.id
        )
        if instrument:
            query = query.where(d.c.instrument == instrument)
        if exposure:
            query = query.where(d.c.exposure == exposure)
        yield from self._stream(query.order_by(d.c.instrument, d.c.exposure, d.c.detector))

    def _stream(self, query: Any) -> Iterator[dict[str, Any]]:
        """The rows of ``query`` (JSON-ready), fetched ``_READ_BATCH`` at a time."""
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=_READ_BATCH).execute(query).mappings():
                yield jsonable(dict(row))

    def exposure(self, instrument: str, exposure: int) -> dict[str, Any] | None:
        """The exposure dimension record, or None when nothing of it is registered."""
        e = tables.exposure
        query = select(e).where(e.c.instrument == instrument, e.c.id == exposure)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return jsonable(dict(row)) if row is not None else None

    def quarantined(self) -> list[dict[str, Any]]:
        return list(self.iter_quarantined())

    def iter_quarantined(self) -> Iterator[dict[str, Any]]:
        """The refused inputs in the order they were first refused, fetched in batches."""
        return self._stream(select(tables.quarantine).order_by(tables.quarantine.c.id))

    def count_datasets(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(tables.dataset)).scalar() or 0)


def checksum_conflict(record: FileRecord, row: Any) -> ChecksumConflict | None:
    """The refusal of ``record`` when its data id is registered (``row``: uri, checksum, size)
    with other bytes; None for the same bytes."""
    if row["checksum"] == record.checksum and row["size"] == record.size:
        return None
    return ChecksumConflict(
        f"{record.data_id.key}: already registered as {row['uri']} with {row['checksum']} "
        f"({row['size']} bytes); refusing {record.uri} with {record.checksum} ({record.size} bytes)"
    )


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as JSON holds it: datetimes ISO UTC text, UUIDs text."""
    return {key: _json_value(value) for key, value in row.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return as_utc(value).isoformat()
    return str(value) if isinstance(value, uuid.UUID) else value


def _dataset_values(registration: Registration, data_id: DataId) -> dict[str, Any]:
    """The dataset row of a new registration."""
    return {
        "id": registration.dataset_id,
        "dataset_type": registration.dataset_type,
        "run": registration.run,
        "instrument": data_id.instrument,
        "exposure": data_id.exposure,
        "detector": data_id.detector,
        "ingest_time": registration.registered_time,
    }


def _datastore_values(ds_id: uuid.UUID, record: FileRecord) -> dict[str, Any]:
    """The datastore row of ``record``: every field but the data id is a column."""
    values = {f.name: _column_value(getattr(record, f.name)) for f in fields(record) if f.name != "data_id"}
    return {"dataset_id": ds_id, **values}
