"""Registry tables (Butler-like): dimensions, dataset types, runs, datasets, datastore records,
and a quarantine of what was refused and why.

Definitions here are the *current* schema; ``migrations.py`` is what creates and evolves it.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
)

metadata = MetaData()

schema_version = Table(
    "obsingest_schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("description", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

instrument = Table(
    "instrument",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("detector_max", Integer, nullable=False),
)

detector = Table(
    "detector",
    metadata,
    Column("instrument", String(32), ForeignKey("instrument.name"), primary_key=True),
    Column("id", Integer, primary_key=True),
)

exposure = Table(
    "exposure",
    metadata,
    Column("instrument", String(32), ForeignKey("instrument.name"), primary_key=True),
    Column("id", BigInteger, primary_key=True),
    Column("day_obs", Integer, nullable=False),
    Column("obs_start", DateTime(timezone=True), nullable=True),
    Column("exposure_time", Float, nullable=True),
    Column("physical_filter", String(64), nullable=True),
)

dataset_type = Table(
    "dataset_type",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("dimensions", String(200), nullable=False),
    Column("storage_class", String(64), nullable=False),
)

run = Table(
    "run",
    metadata,
    Column("name", String(200), primary_key=True),
)

dataset = Table(
    "dataset",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("dataset_type", String(64), ForeignKey("dataset_type.name"), nullable=False),
    Column("run", String(200), ForeignKey("run.name"), nullable=False),
    Column("instrument", String(32), nullable=False),
    Column("exposure", BigInteger, nullable=False),
    Column("detector", Integer, nullable=False),
    Column("ingest_time", DateTime(timezone=True), nullable=False),
    UniqueConstraint(
        "dataset_type", "run", "instrument", "exposure", "detector", name="uq_dataset_dataid"
    ),
    ForeignKeyConstraint(["instrument", "exposure"], ["exposure.instrument", "exposure.id"]),
    ForeignKeyConstraint(["instrument", "detector"], ["detector.instrument", "detector.id"]),
)

datastore_record = Table(
    "datastore_record",
    metadata,
    Column("dataset_id", Uuid, ForeignKey("dataset.id"), primary_key=True),
    Column("uri", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("checksum", String(64), nullable=False),
    Column("md5", String(64), nullable=False, default=""),
    Column("readout_time", DateTime(timezone=True), nullable=True),
    Column("compressed_time", DateTime(timezone=True), nullable=True),
    Column("stored_time", DateTime(timezone=True), nullable=True),
    Column("transport", String(16), nullable=False, default="direct"),
)

quarantine = Table(
    "quarantine",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("object_uri", Text, nullable=False),
    Column("reason", String(64), nullable=False),
    Column("message", Text, nullable=False),
    # '' rather than NULL so the unique key deduplicates redeliveries on both backends
    Column("checksum", String(64), nullable=False, default=""),
    Column("instrument", String(32), nullable=True),
    Column("exposure", BigInteger, nullable=True),
    Column("detector", Integer, nullable=True),
    Column("size", BigInteger, nullable=True),
    Column("first_seen", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Column("occurrences", Integer, nullable=False, default=1),
    UniqueConstraint("object_uri", "reason", "checksum", name="uq_quarantine_object"),
)
