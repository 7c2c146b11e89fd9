"""Versioned registry schema migrations.

Each migration runs once, in order, in its own transaction, and records itself in
``obsingest_schema_version``. Concurrent starters (many function instances at once) serialise on
an advisory lock on PostgreSQL and on SQLite's write lock, so exactly one applies each step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, Index, Table, insert, inspect, select, text
from sqlalchemy.dialects import postgresql, sqlite

from obsingest import camera
from obsingest.dataid import INSTRUMENTS
from obsingest.registry import facility_tables, tables

_LOCK_KEY = 0x0B5_1_6E57  # arbitrary constant for pg_advisory_xact_lock


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _seed_dimensions(conn: Connection) -> None:
    """Instruments and their detectors are static dimension records: seed them once."""
    for name, count in INSTRUMENTS.items():
        conn.execute(insert(tables.instrument).values(name=name, detector_max=count))
        conn.execute(insert(tables.detector), [{"instrument": name, "id": i} for i in range(count)])
    conn.execute(
        insert(tables.dataset_type).values(
            name="raw", dimensions="instrument,exposure,detector", storage_class="Exposure"
        )
    )


def _add_missing_columns(conn: Connection, table: Table) -> None:
    """ALTER TABLE ... ADD COLUMN for the columns of ``table`` the database lacks."""
    have = {c["name"] for c in inspect(conn).get_columns(table.name)}
    for column in table.columns:
        if column.name not in have:
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))


def _butler_dimensions(conn: Connection) -> None:
    """Butler's dimension data: the new instrument/detector/exposure columns, and the instrument
    and detector records as obs_lsst registers them (LSSTCam's corner rafts were missing)."""
    for table in (tables.instrument, tables.detector, tables.exposure):
        _add_missing_columns(conn, table)
    upsert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    for inst in camera.INSTRUMENTS.values():
        rows = [(tables.instrument, inst.record())]
        rows += [(tables.detector, inst.detector_record(det.id)) for det in inst.detectors]
        for table, values in rows:
            key = table.primary_key.columns
            rest = {k: v for k, v in values.items() if k not in key}
            conn.execute(upsert(table).values(values).on_conflict_do_update(index_elements=key, set_=rest))


def _create(*items: Table | Index) -> Callable[[Connection], None]:
    """A migration creating tables and indexes (``checkfirst``: migration 1 may have made them)."""

    def apply(conn: Connection) -> None:
        for item in items:
            item.create(conn, checkfirst=True)

    return apply


#: facility_tables (outbox, canary, closures) has its own MetaData: migration 1 never makes them
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial tables", lambda conn: tables.metadata.create_all(conn, checkfirst=True)),
    Migration(2, "seed instruments, detectors and the raw dataset type", _seed_dimensions),
    Migration(3, "Butler dimension records: instrument, detector, exposure", _butler_dimensions),
    Migration(
        4, "arrivals outbox and canary log", _create(facility_tables.arrival_outbox, facility_tables.canary)
    ),
    Migration(
        5, "exposure manifests; presence indexes", _create(tables.exposure_manifest, *tables.PRESENCE_INDEXES)
    ),
    Migration(
        6,
        "exposure closures; manifest recorded-time index",
        _create(facility_tables.exposure_closure, tables.MANIFEST_RECORDED_INDEX),
    ),
    Migration(7, "exposure header warnings", lambda conn: _add_missing_columns(conn, tables.exposure)),
    Migration(8, "datastore record URI index", _create(tables.DATASTORE_URI_INDEX)),
    Migration(9, "datastore record stored-time index", _create(tables.DATASTORE_STORED_INDEX)),
    Migration(10, "outbox pending-rows index", _create(facility_tables.OUTBOX_PENDING_INDEX)),
)

LATEST = MIGRATIONS[-1].version


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table(tables.schema_version.name):
        return 0
    value = conn.execute(
        select(tables.schema_version.c.version).order_by(tables.schema_version.c.version.desc()).limit(1)
    ).scalar()
    return int(value or 0)


def migrate(engine: Engine) -> int:
    """Bring the schema to LATEST (a schema there costs one look, no lock); how many applied."""
    with engine.connect() as conn:
        if current_version(conn) >= LATEST:
            return 0
    applied = 0
    for migration in MIGRATIONS:
        with engine.begin() as conn:
            # SQLite transactions begin IMMEDIATE (see registry.engine), which serialises too.
            if conn.dialect.name == "postgresql":
                # a step waits for another process's step and for its tables' locks as long as it
                # takes (requests' lock waits are bounded: registry.engine's lock_timeout)
                conn.execute(text("SET LOCAL lock_timeout = 0"))
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            tables.schema_version.create(conn, checkfirst=True)
            if current_version(conn) >= migration.version:
                continue
            migration.apply(conn)
            conn.execute(
                insert(tables.schema_version).values(
                    version=migration.version, description=migration.description, applied_at=datetime.now(UTC)
                )
            )
            applied += 1
    return applied
