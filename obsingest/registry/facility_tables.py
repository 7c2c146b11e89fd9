"""Tables of the data facility's safety nets, in their own ``MetaData`` (migrations 4 and 6 make
them, never migration 1's ``create_all``): ``arrival_outbox`` (one row per announcement,
``published_at`` NULL: pending, ``lease_until``: a claim), ``canary`` (each canary object
reconcile wrote and when its event was seen), ``exposure_closure`` (an exposure's first closure).
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

#: The drain's claim (``outbox.claim``): the first free pending rows in (attempts, id) order, read
#: from an index of the pending rows alone instead of every pending row sorted per claim (a backlog
#: of a night after an outage, ~190,000 rows, was sorted again for each claim of 100).
OUTBOX_PENDING_INDEX = sa.Index(
    "ix_arrival_outbox_pending",
    arrival_outbox.c.published_at,  # NULL in each entry: the claim orders by it too (see there)
    arrival_outbox.c.attempts,
    arrival_outbox.c.id,
    postgresql_where=arrival_outbox.c.published_at.is_(None),
    sqlite_where=arrival_outbox.c.published_at.is_(None),
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
