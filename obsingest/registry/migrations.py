"""Versioned registry schema migrations.

Each migration runs once, in order, in its own transaction, and records itself in
``obsingest_schema_version``. Concurrent starters (many function instances at once) serialise on
an advisory lock on PostgreSQL and on SQLite's write lock, so exactly one applies each step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, Index, Table, insert, inspect, select, text, update

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
        # (migration 3 completes these records; LSSTCam's count is 205 since it)
        conn.execute(insert(tables.detector), [{"instrument": name, "id": i} for i in range(count)])
    conn.execute(
        insert(tables.dataset_type).values(
            name="raw", dimensions="instrument,exposure,detector", storage_class="Exposure"
        )
    )


def _add_missing_columns(conn: Connection, table: Table) -> None:
    """ALTER TABLE ... ADD COLUMN for columns of the current definition the database lacks (a
    registry created before them); a fresh one already has them from ``create_all``."""
    have = {c["name"] for c in inspect(conn).get_columns(table.name)}
    for column in table.columns:
        if column.name not in have:
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))


def _butler_dimensions(conn: Connection) -> None:
    """Butler's dimension data: the new instrument/detector/exposure columns, and the instrument
    and detector records as obs_lsst registers them (LSSTCam's corner rafts, ids 189..204,
    were missing before)."""
    for table in (tables.instrument, tables.detector, tables.exposure):
        _add_missing_columns(conn, table)
    i, d = tables.instrument, tables.detector
    for inst in camera.INSTRUMENTS.values():
        if conn.execute(select(i.c.name).where(i.c.name == inst.name)).first():
            conn.execute(update(i).where(i.c.name == inst.name).values(inst.record()))
        else:
            conn.execute(insert(i).values(inst.record()))
        have = set(conn.execute(select(d.c.id).where(d.c.instrument == inst.name)).scalars())
        for det in inst.detectors:
            values = inst.detector_record(det.id)
            if det.id in have:
                rest = {k: v for k, v in values.items() if k not in ("instrument", "id")}
                conn.execute(update(d).where(d.c.instrument == inst.name, d.c.id == det.id).values(rest))
            else:
                conn.execute(insert(d).values(values))


def _create(*items: Table | Index) -> Callable[[Connection], None]:
    """A migration that creates tables and indexes new since (``checkfirst``: a registry created
    after them got them from migration 1's ``create_all``)."""

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
    """Bring the schema to LATEST; returns the number of migrations applied. A schema already
    at LATEST (every start but the first) costs one look at its version, no lock."""
    with engine.connect() as conn:
        if current_version(conn) >= LATEST:
            return 0
    applied = 0
    for migration in MIGRATIONS:
        with engine.begin() as conn:
            # SQLite transactions begin IMMEDIATE (see registry.engine), which serialises too.
            if conn.dialect.name == "postgresql":
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
