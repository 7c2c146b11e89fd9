"""Tables of the data facility's safety nets: the arrivals outbox, the canary log, and each
exposure's closure.

Kept apart from ``tables.py`` (the Butler-like schema) because they are not part of what a Butler
registry holds: they are the pipeline's own bookkeeping. They live in their own ``MetaData`` so
migration 1 (``create_all`` of the dataset schema) never creates them behind migration 3's back:
migration 4 (outbox, canary) and migration 6 (closures) are the one place they come from, on
fresh and on existing registries alike.

- ``arrival_outbox``: one row per announcement: per registered dataset (its ArrivalEvent, written
  in the same transaction as the dataset: transactional outbox) and per complete exposure (its
  ExposureIngested, keyed by the exposure's event id: ``registry.ingested``). ``dataset_id`` is
  that key, unique, so an announcement is written once. ``published_at`` NULL means "not
  announced yet"; ``lease_until`` is a claim, so the process that wrote the row and any drain
  never publish the same row at once.
- ``canary``: one row per canary object the reconcile service wrote, with when the register
  function saw its finalize event (NULL: not yet).
- ``exposure_closure``: one row per exposure that was closed, the first closure only: completed
  (``ok`` / ``over_budget``, with ``ingested_at`` set when its ExposureIngested was written) or
  ``incomplete`` when its deadline passed first (``ingested_at`` set later if it completes).
  Inserted once (ON CONFLICT DO NOTHING): the metrics count an exposure when its row is
  inserted, so no restart or second process counts it again.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
)

metadata = MetaData()

#: 64-bit ids on PostgreSQL; SQLite autoincrements only an INTEGER PRIMARY KEY.
_ID = BigInteger().with_variant(Integer, "sqlite")

arrival_outbox = Table(
    "arrival_outbox",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("dataset_id", Uuid, nullable=False),
    Column("topic", String(255), nullable=False),
    Column("message_key", String(255), nullable=True),
    Column("attributes", Text, nullable=False, default="{}"),
    Column("payload", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=False, default=""),
    Column("published_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("dataset_id", name="uq_arrival_outbox_dataset"),
    Index("ix_arrival_outbox_published", "published_at"),
)

canary = Table(
    "canary",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("written_at", DateTime(timezone=True), nullable=True),
    Column("seen_at", DateTime(timezone=True), nullable=True),
    Index("ix_canary_written", "written_at"),
)

exposure_closure = Table(
    "exposure_closure",
    metadata,
    Column("instrument", String(32), primary_key=True),
    Column("exposure", BigInteger, primary_key=True),
    #: the first closure: ok | over_budget (completed) | incomplete (at its deadline)
    Column("status", String(16), nullable=False),
    #: which component closed it: register (its last CCD) | reconcile (sweep, deadline)
    Column("closed_by", String(16), nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=False),
    Column("missing", Integer, nullable=False, default=0),
    #: seconds, readout -> registered, of the slowest CCD registered when it was closed
    Column("latency_max", Float, nullable=True),
    #: when its ExposureIngested was written to the outbox (NULL: not complete yet)
    Column("ingested_at", DateTime(timezone=True), nullable=True),
    Column("event_id", Uuid, nullable=True),
)
