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

import sqlalchemy as sa

metadata = sa.MetaData()

#: 64-bit ids on PostgreSQL; SQLite autoincrements only an INTEGER PRIMARY KEY.
_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")

arrival_outbox = sa.Table(
    "arrival_outbox",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("dataset_id", sa.Uuid, nullable=False),
    sa.Column("topic", sa.String(255), nullable=False),
    sa.Column("message_key", sa.String(255), nullable=True),
    sa.Column("attributes", sa.Text, nullable=False, default="{}"),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("last_error", sa.Text, nullable=False, default=""),
    sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    sa.UniqueConstraint("dataset_id", name="uq_arrival_outbox_dataset"),
    sa.Index("ix_arrival_outbox_published", "published_at"),
)

canary = sa.Table(
    "canary",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("written_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("seen_at", sa.DateTime(timezone=True), nullable=True),
    sa.Index("ix_canary_written", "written_at"),
)

exposure_closure = sa.Table(
    "exposure_closure",
    metadata,
    sa.Column("instrument", sa.String(32), primary_key=True),
    sa.Column("exposure", sa.BigInteger, primary_key=True),
    #: the first closure: ok | over_budget (completed) | incomplete (at its deadline)
    sa.Column("status", sa.String(16), nullable=False),
    #: which component closed it: register (its last CCD) | reconcile (sweep, deadline)
    sa.Column("closed_by", sa.String(16), nullable=False),
    sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("missing", sa.Integer, nullable=False, default=0),
    #: seconds, readout -> registered, of the slowest CCD registered when it was closed
    sa.Column("latency_max", sa.Float, nullable=True),
    #: when its ExposureIngested was written to the outbox (NULL: not complete yet)
    sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("event_id", sa.Uuid, nullable=True),
)
