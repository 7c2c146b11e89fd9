"""Transport (b): a compressed CCD as chunked Avro (CcdChunk) records over Kafka.

``open_kafka_sender("kafka://HOST:PORT/TOPIC", producer=...)`` is what ``producers.sender``
calls; the assembler service in ``functions/assembler`` rebuilds the files at the facility.
"""

from producers.kafka.chunk_sender import (
    ChunkDeliveryFailed,
    ChunkRejected,
    KafkaChunkSender,
    open_kafka_sender,
    parse_kafka_url,
    producer_config,
)
from producers.kafka.chunker import default_chunk_size, encode_chunk, iter_chunks
from producers.kafka.settings import KafkaProducerSettings

__all__ = [
    "ChunkDeliveryFailed",
    "ChunkRejected",
    "KafkaChunkSender",
    "KafkaProducerSettings",
    "default_chunk_size",
    "encode_chunk",
    "iter_chunks",
    "open_kafka_sender",
    "parse_kafka_url",
    "producer_config",
]
