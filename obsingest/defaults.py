"""One source for every default the pipeline's parts must agree on (prefixes, topic and
subscription names, the per-CCD budget), so changing one never leaves another part publishing
where nothing listens. Plain constants only: ``obsingest --help`` imports it and must stay instant.
"""

from __future__ import annotations

# -- object store ----------------------------------------------------------------------------
#: Where raw CCDs are stored (the layout below it: ``obsingest.dataid``).
RAW_PREFIX = "raw/"
#: Where refused bytes are parked (never overwriting the stored object), reason in metadata.
QUARANTINE_PREFIX = "quarantine/"
#: Where the reconcile service writes its canary: an object that must come back as a finalize
#: event, proving notifications still flow. Never a dataset.
CANARY_PREFIX = "canary/"
#: Prefixes that carry finalize notifications to the register function.
NOTIFIED_PREFIXES: tuple[str, ...] = (RAW_PREFIX, QUARANTINE_PREFIX, CANARY_PREFIX)
#: The embedded default store.
STORE_URL = "file://./store"

# -- registry ----------------------------------------------------------------------------------
REGISTRY_URL = "sqlite:///registry.sqlite3"
#: At most this many seconds a Butler batch waits for the registrations still being read and
#: checked (``OBSINGEST_BUTLER_GATHER``): a whole exposure arriving at once is one ingest.
BUTLER_GATHER_SECONDS = 0.5
#: ... and while the deliveries come in a burst (arrivals less than this many seconds apart).
BUTLER_GATHER_GAP_SECONDS = 0.02
RAW_DATASET_TYPE = "raw"
#: Run collection template, Butler's convention for raws.
RUN_TEMPLATE = "{instrument}/raw/all"

# -- topics and subscriptions (Pub/Sub and Kafka share the names) ------------------------------
EXPOSURES_TOPIC = "exposures"
#: Where the manifests relay puts manifests the function could not take (kept by
#: ``exposures-dlq-hold`` for a human; no redrive: recording is idempotent, re-publish by hand).
EXPOSURES_DLQ_TOPIC = "exposures-dlq"
CHUNKS_TOPIC = "ccd-chunks"
CHUNKS_DLQ_TOPIC = "ccd-chunks-dlq"
OBJECTS_TOPIC = "ccd-objects"
OBJECTS_DLQ_TOPIC = "ccd-objects-dlq"
ARRIVALS_TOPIC = "ccd-arrivals"
SUMMARIES_TOPIC = "exposure-summaries"
ALERTS_TOPIC = "budget-alerts"
#: The streaming summary's dead letters (undecodable or late inputs; ``infra/terraform/pubsub.tf``).
EVENTS_DLQ_TOPIC = "exposure-events-dlq"
#: One ExposureIngested per exposure, when the last CCD its manifest expects is registered.
EXPOSURES_INGESTED_TOPIC = "exposures-ingested"
#: The emulator push relay's pull subscription on OBJECTS_TOPIC.
RELAY_SUBSCRIPTION = "ccd-objects-relay"
#: The emulator push relay's pull subscription on EXPOSURES_TOPIC (-> the function's on_manifest).
MANIFEST_RELAY_SUBSCRIPTION = "exposures-relay"
#: Pushes of one message before it is dead-lettered: the production push subscription's
#: ``max_delivery_attempts`` (``infra/terraform``), mirrored by the relay.
RELAY_MAX_ATTEMPTS = 10
#: Pushes the relay keeps in flight at once.
RELAY_CONCURRENCY = 8
#: Where the relay pushes by default: the register function under functions-framework.
RELAY_PUSH_URL = "http://127.0.0.1:8080/"
#: Suffix of the subscription that keeps a dead-letter topic's messages (``ccd-objects-dlq-hold``):
#: a topic without a subscription drops what is published to it.
HOLD_SUFFIX = "-hold"
#: Suffix of the topic where redrive parks a dead letter it gave up on, for a human
#: (``ccd-objects-dlq-parked``, kept by ``ccd-objects-dlq-parked-hold``).
PARKED_SUFFIX = "-parked"
#: Kafka consumer group of the chunk assemblers.
ASSEMBLER_GROUP = "ccd-assembler"

# -- services --------------------------------------------------------------------------------
#: Pub/Sub / GCS project on the emulators.
LOCAL_PROJECT = "obsingest-local"
LOCAL_HOST = "127.0.0.1"
#: The local stack's Kafka port and address (``obsingest stack up``); KAFKA_BOOTSTRAP_SERVERS wins.
LOCAL_KAFKA_PORT = 19092
KAFKA_BOOTSTRAP = f"{LOCAL_HOST}:{LOCAL_KAFKA_PORT}"

# -- the camera -------------------------------------------------------------------------------
#: Seconds between exposures at the summit (readout to readout): Rubin's cadence.
CADENCE_SECONDS = 17.0

# -- the promise -----------------------------------------------------------------------------
#: Seconds from readout to announcement, per CCD.
BUDGET_SECONDS = 5.0
#: An exposure not complete this many seconds after its deadline's budget (shutter close + the
#: budget + this grace) is counted incomplete at its deadline: 5 + 25 = 30 s after the exposure
#: ends, the observatory's "later than 30 s counts as late".
EXPOSURE_DEADLINE_GRACE_SECONDS = 25.0
