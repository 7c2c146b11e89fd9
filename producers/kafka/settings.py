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
    """How edge producers talk to Kafka (what each setting is for: producers/kafka/README.md)."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_KAFKA_", extra="ignore")

    chunks_topic: str = defaults.CHUNKS_TOPIC
    #: 0 = ``default_chunk_size(message_max_bytes)``
    chunk_size: int = Field(default=0, ge=0)
    message_max_bytes: int = Field(default=DEFAULT_MESSAGE_MAX_BYTES, ge=64 * 1024)
    linger_ms: float = Field(default=2.0, ge=0)
    batch_size: int = Field(default=16 * 1024 * 1024, ge=1024)
    #: librdkafka's delivery.timeout.ms: the assembler's incomplete-file timeout must be longer
    delivery_timeout_s: float = Field(default=60.0, gt=0)
