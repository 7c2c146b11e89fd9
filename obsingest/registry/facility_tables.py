"""Tables of the data facility's safety nets: the arrivals outbox and the canary log.

Kept apart from ``tables.py`` (the Butler-like schema) because they are not part of what a Butler
registry holds: they are the pipeline's own bookkeeping. They live in their own ``MetaData`` so
migration 1 (``create_all`` of the dataset schema) never creates them behind migration 3's back:
migration 3 is the one place they come from, on fresh and on existing registries alike.

- ``arrival_outbox``: one row per registered dataset, written in the same transaction as the
  dataset (transactional outbox). ``published_at`` NULL means "registered but not announced yet";
  ``lease_until`` is a claim, so the process that registered the dataset and any drain never
  publish the same row at once.
- ``canary``: one row per canary object the reconcile service wrote, with when the register
  function saw its finalize event (NULL: not yet).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
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
