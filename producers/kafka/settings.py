"""Producer settings of the Kafka chunk transport (``OBSINGEST_KAFKA_<FIELD>``), read once at
start-up."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from obsingest import defaults
from obsingest.settings import KafkaClientSettings

#: The broker's ``message.max.bytes`` we ask for (the local stack's too): room for 8 MiB chunks.
DEFAULT_MESSAGE_MAX_BYTES = 16 * 1024 * 1024


class KafkaProducerSettings(KafkaClientSettings):
    """How edge producers talk to Kafka. ``chunk_size=0`` means "derive from the record limit"."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_KAFKA_", extra="ignore")

    chunks_topic: str = defaults.CHUNKS_TOPIC
    exposures_topic: str = defaults.EXPOSURES_TOPIC
    #: Payload bytes per CcdChunk; 0 = ``default_chunk_size(message_max_bytes)``.
    chunk_size: int = Field(default=0, ge=0)
    #: Must not exceed the broker's/topic's record limit; the chunk size is derived from it.
    message_max_bytes: int = Field(default=DEFAULT_MESSAGE_MAX_BYTES, ge=64 * 1024)
    #: A little batching lets librdkafka pipeline a CCD's chunks.
    linger_ms: float = Field(default=2.0, ge=0)
    #: librdkafka batch.size; a record larger than this is sent in a batch of its own.
    batch_size: int = Field(default=16 * 1024 * 1024, ge=1024)
    #: How long librdkafka may retry one chunk before reporting failure (delivery.timeout.ms).
    #: The assembler's incomplete-file timeout must be longer than this (see its README).
    delivery_timeout_s: float = Field(default=60.0, gt=0)
