"""Transport (b): a compressed CCD as chunked Avro (CcdChunk) records over Kafka.

``open_kafka_sender("kafka://HOST:PORT/TOPIC", producer=...)`` is what ``producers.sender``
calls; the assembler service in ``functions/assembler`` rebuilds the files at the facility.
"""

from producers.kafka.chunk_sender import (
    ChunkDeliveryFailed,
    ChunkRejected,
    KafkaChunkSender,
    KafkaSendResult,
    ProducerFenced,
    open_kafka_sender,
    parse_kafka_url,
    producer_config,
    publish_manifest,
)
from producers.kafka.chunker import (
    ChunkSizeError,
    chunk_count,
    default_chunk_size,
    encode_chunk,
    iter_chunks,
    resolve_chunk_size,
)
from producers.kafka.settings import KafkaProducerSettings

__all__ = [
    "ChunkDeliveryFailed",
    "ChunkRejected",
    "ChunkSizeError",
    "KafkaChunkSender",
    "KafkaProducerSettings",
    "KafkaSendResult",
    "ProducerFenced",
    "chunk_count",
    "default_chunk_size",
    "encode_chunk",
    "iter_chunks",
    "open_kafka_sender",
    "parse_kafka_url",
    "producer_config",
    "publish_manifest",
    "resolve_chunk_size",
]
