"""Transport (b): a compressed CCD as chunked Avro (CcdChunk) records over Kafka, rebuilt at the
facility by ``functions/assembler``.
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
