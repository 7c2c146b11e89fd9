"""Registry tables, the *current* schema (``migrations.py`` creates and evolves it): Butler-like
dimensions (what daf_butler universe 8 records need, for ``butler_export``), dataset types, runs,
datasets, datastore records, the quarantine, and each ExposureManifest (completeness).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
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
    Column("class_name", String(64), nullable=True),
    Column("visit_max", BigInteger, nullable=True),
    Column("exposure_max", BigInteger, nullable=True),
    Column("visit_system", Integer, nullable=True),
)

detector = Table(
    "detector",
    metadata,
    Column("instrument", String(32), ForeignKey("instrument.name"), primary_key=True),
    Column("id", Integer, primary_key=True),
    Column("full_name", String(32), nullable=True),
    Column("raft", String(32), nullable=True),
    Column("name_in_raft", String(32), nullable=True),
    Column("purpose", String(32), nullable=True),
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
    # the Butler exposure record's fields (migration 3; obs_start/obs_end: its timespan)
    Column("obs_id", String(64)),
    Column("group_name", String(64)),
    Column("seq_num", Integer),
    Column("band", String(32)),
    Column("observation_type", String(16)),
    Column("observation_reason", String(68)),
    Column("dark_time", Float),
    Column("obs_end", DateTime(timezone=True)),
    Column("tracking_ra", Float),
    Column("tracking_dec", Float),
    Column("sky_angle", Float),
    Column("azimuth", Float),
    Column("zenith_angle", Float),
    Column("science_program", String(64)),
    Column("target_name", String(64)),
    Column("has_simulated", Boolean),
    Column("can_see_sky", Boolean),
    # what the header translation warned about, a JSON list of strings (migration 7)
    Column("header_warnings", Text, nullable=True),
)

dataset_type = Table(
    "dataset_type",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("dimensions", String(200), nullable=False),
    Column("storage_class", String(64), nullable=False),
)

run = Table("run", metadata, Column("name", String(200), primary_key=True))

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
    UniqueConstraint("dataset_type", "run", "instrument", "exposure", "detector", name="uq_dataset_dataid"),
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

exposure_manifest = Table(
    "exposure_manifest",
    metadata,
    Column("instrument", String(32), ForeignKey("instrument.name"), primary_key=True),
    Column("exposure", BigInteger, primary_key=True),
    Column("day_obs", Integer, nullable=False),
    #: expected detector ids, ascending, comma-separated ("0,1,2"): read whole, never queried into
    Column("detectors", Text, nullable=False),
    Column("expected", Integer, nullable=False),
    Column("obs_start", DateTime(timezone=True), nullable=True),
    Column("exposure_time", Float, nullable=True),
    Column("physical_filter", String(64), nullable=True),
    Column("published", DateTime(timezone=True), nullable=True),
    Column("recorded_time", DateTime(timezone=True), nullable=False),
    #: SHA-256 of the manifest's content (``published`` excluded): same digest = a redelivery
    Column("digest", String(64), nullable=False),
)

#: Indexes the presence reads need beyond the keys (a CCD is a prefix of ``uq_dataset_dataid``, a
#: night an id range of the exposure and manifest keys).
PRESENCE_INDEXES: tuple[Index, ...] = (
    # how many datasets each exposure of a page has: the version of the reader's cached answers
    # (a night page of 50 exposures: ~10,000 entries)
    Index("ix_dataset_exposure", dataset.c.exposure),
    # the status view's recently quarantined inputs
    Index("ix_quarantine_last_seen", quarantine.c.last_seen),
)

#: The facility's sweep of recently recorded manifests (``registry.ingested``).
MANIFEST_RECORDED_INDEX = Index("ix_exposure_manifest_recorded", exposure_manifest.c.recorded_time)

#: The reconcile's lookup of objects by URI (``audit.registered_uris``): no scan per pass.
DATASTORE_URI_INDEX = Index("ix_datastore_record_uri", datastore_record.c.uri)

#: The reconcile full sweep's window of stored files (``audit.stored_between``): no scan of all
#: history (datastore records are never purged) every sweep.
DATASTORE_STORED_INDEX = Index("ix_datastore_record_stored", datastore_record.c.stored_time)
