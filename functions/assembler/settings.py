"""Assembler settings, read once at start-up (``OBSINGEST_ASSEMBLER_<FIELD>``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from obsingest import defaults
from obsingest.settings import KafkaClientSettings, StoreLayout


class AssemblerSettings(KafkaClientSettings, StoreLayout):
    model_config = SettingsConfigDict(env_prefix="OBSINGEST_ASSEMBLER_", extra="ignore")

    topic: str = defaults.CHUNKS_TOPIC
    dlq_topic: str = defaults.CHUNKS_DLQ_TOPIC
    group_id: str = defaults.ASSEMBLER_GROUP
    #: Object store the files go to: file://DIR or gs://BUCKET.
    store_url: str = defaults.STORE_URL
    #: Payload bytes held for incomplete files; must exceed the largest file (recovery re-reads one).
    memory_limit_bytes: int = Field(default=512 * 1024 * 1024, ge=1024 * 1024)
    #: An open file idle this long is dead-lettered; must exceed the producers' delivery timeout.
    incomplete_timeout_s: float = Field(default=300.0, gt=0)
    #: Largest record the broker accepts (message.max.bytes): sizes the fetches.
    max_record_bytes: int = Field(default=16 * 1024 * 1024, ge=1024 * 1024)
    #: fetch.max.bytes: one fetch response brings up to this much (several chunks).
    fetch_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    #: librdkafka's per-partition prefetch queue (queued.max.messages.kbytes), in KiB.
    prefetch_kbytes: int = Field(default=64 * 1024, ge=1024)
    #: Most records handled per poll (bounds time between commits).
    batch_records: int = Field(default=64, ge=1)
    #: Store writes retried this often (exponential backoff) before the service gives up.
    store_attempts: int = Field(default=5, ge=1)
    store_backoff_s: float = Field(default=0.2, gt=0)
    #: Files written to the store at once while consuming goes on (twice as many may wait).
    store_concurrency: int = Field(default=8, ge=1)
    session_timeout_ms: int = Field(default=10_000, ge=1000)
