"""The edge's Kafka sender: one compressed CCD -> its CcdChunk records, every one acknowledged
(``acks=all``) before ``send`` returns; a failed chunk raises and the caller resends the whole CCD.
Why the producer is idempotent and keyed by the data id: producers/kafka/README.md.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

from obsingest import defaults
from obsingest.bus.kafka import fatal_error
from obsingest.dataid import DataId
from obsingest.errors import PermanentError, RetriableError
from obsingest.exhaustion import exhausted, kafka_exhaustion
from obsingest.logs import get_logger, log_event
from producers.ccd_bytes import check_ccd_bytes
from producers.kafka.chunker import encode_chunk, iter_chunks, resolve_chunk_size
from producers.kafka.settings import KafkaProducerSettings

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

log = get_logger("obsingest.producer.kafka")


class ChunkDeliveryFailed(RetriableError, reason="chunk-delivery-failed"):
    """A chunk was not acknowledged (broker down, timeout): resend the whole CCD."""


class ChunkRejected(PermanentError, reason="chunk-rejected"):
    """The broker refused a chunk for good (record too large, topic authorisation, ...)."""


class ProducerFenced(PermanentError, reason="producer-fatal"):
    """librdkafka reported a fatal error: that producer instance can no longer send (the sender
    replaces it: a resend goes through a new one)."""


@dataclass(frozen=True)
class KafkaSendResult:
    """What the edge learns about one CCD sent over Kafka."""

    status: Literal["acked"]  # every chunk acknowledged by all in-sync replicas
    checksum: str
    object_name: str  # where the assembler stores it (named, as it is, from the header)
    size: int
    chunks: int
    partition: int
    first_offset: int
    last_offset: int


@dataclass
class _Delivery:
    """Delivery reports of one CCD's chunks; callbacks may run on any thread that polls."""

    expected: int
    errors: list[KafkaError] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(err)
            else:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None  # set once delivered
                self.offsets.append((partition, offset))
            if len(self.offsets) + len(self.errors) >= self.expected:
                self.done.set()

    def wait(self, producer: Producer, timeout: float) -> bool:
        """Serve delivery reports until every one is in (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while not self.done.is_set() and time.monotonic() < deadline:
            producer.poll(0.01)
        return self.done.is_set()


def producer_config(settings: KafkaProducerSettings, client_id: str) -> dict[str, Any]:
    """librdkafka settings for chunk producers (the reasons are in producers/kafka/README.md)."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "none",  # payload is already Rice-compressed
        "message.max.bytes": settings.message_max_bytes,
        "batch.size": settings.batch_size,
        "linger.ms": settings.linger_ms,
        "delivery.timeout.ms": int(settings.delivery_timeout_s * 1000),
        "queue.buffering.max.kbytes": 1024 * 1024,
        "partitioner": "murmur2_random",  # the Java client's choice: same key -> same partition
        **settings.extra,
    }


class KafkaChunkSender:
    """A ``producers.sender.Sender`` streaming CCDs as chunks to one topic. Thread-safe."""

    def __init__(
        self,
        settings: KafkaProducerSettings,
        topic: str | None = None,
        producer_name: str = "edge",
        producer: Producer | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.settings = settings
        self.topic = topic or settings.chunks_topic
        self.producer_name = producer_name
        self.chunk_size = resolve_chunk_size(settings.chunk_size, settings.message_max_bytes)
        self._producer = producer or Producer(producer_config(settings, producer_name))
        self._lock = threading.Lock()

    def send(
        self, data_id: DataId, data: bytes, readout_time: datetime, compressed_time: datetime | None = None
    ) -> KafkaSendResult:
        """Send every chunk of one CCD; return once all are acknowledged, else raise."""
        from confluent_kafka import KafkaException

        started = time.perf_counter()
        identity = check_ccd_bytes(data_id, data)
        chunks = list(
            iter_chunks(data_id, data, readout_time, compressed_time, self.producer_name, self.chunk_size)
        )
        checksum = chunks[0].file_checksum
        producer = self._producer
        delivery = _Delivery(expected=len(chunks))
        key = data_id.key.encode()
        for chunk in chunks:
            value = encode_chunk(chunk)
            while True:
                try:
                    producer.produce(self.topic, value=value, key=key, on_delivery=delivery.on_delivery)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    producer.poll(0.05)
                except KafkaException as exc:
                    raise self._classify(exc.args[0], data_id, producer) from exc
        try:
            acked = delivery.wait(producer, self.settings.delivery_timeout_s + 10)
        except (KafkaException, SystemError) as exc:  # a fatal error raises out of the poll serving it
            # (SystemError when a delivery report was served after it: the fatal error is its cause)
            fatal = exc if isinstance(exc, KafkaException) else exc.__cause__
            if not isinstance(fatal, KafkaException):
                raise
            raise self._classify(fatal.args[0], data_id, producer) from exc
        if not acked:
            raise ChunkDeliveryFailed(
                f"{data_id.key}: {len(delivery.offsets)}/{delivery.expected} chunks acknowledged "
                f"within {self.settings.delivery_timeout_s} s"
            )
        if delivery.errors:
            raise self._classify(delivery.errors[0], data_id, producer)
        partitions = {p for p, _ in delivery.offsets}
        if len(partitions) > 1:  # the topic gained partitions mid-CCD: no assembler sees it whole
            raise ChunkDeliveryFailed(
                f"{data_id.key}: chunks landed in partitions {sorted(partitions)} of {self.topic}, "
                "not one: resend the whole CCD"
            )
        offsets = sorted(o for _, o in delivery.offsets)
        result = KafkaSendResult(
            status="acked",
            checksum=checksum,
            object_name=identity.object_name(defaults.RAW_PREFIX),
            size=len(data),
            chunks=len(chunks),
            partition=partitions.pop(),
            first_offset=offsets[0],
            last_offset=offsets[-1],
        )
        log_event(
            log,
            "kafka.sent",
            data_id=data_id.key,
            topic=self.topic,
            size=len(data),
            chunks=len(chunks),
            partition=result.partition,
            first_offset=result.first_offset,
            send_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return result

    def _classify(self, err: KafkaError, data_id: DataId, producer: Producer) -> Exception:
        """Retriable when Kafka says so (or the chunk merely timed out); else permanent. A fatal
        error ends ``producer`` for good: a new one takes its place for the next send."""
        from confluent_kafka import KafkaError
        from confluent_kafka import Producer as NewProducer

        message = f"{data_id.key}: chunk not delivered to {self.topic}: {err.str()}"
        log_event(log, "kafka.send_failed", logging.ERROR, data_id=data_id.key, error=err.str())
        if fatal_error(err):
            with self._lock:
                if self._producer is producer:
                    self._producer = NewProducer(producer_config(self.settings, self.producer_name))
            return ProducerFenced(message)
        kind = kafka_exhaustion(err.name())  # the broker's disk full: an outage (bus-full)
        if kind is not None:
            return exhausted(kind, "bus", f"kafka topic {self.topic}", err.str())
        transient = {KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
        if err.retriable() or err.code() in transient:
            return ChunkDeliveryFailed(message)
        return ChunkRejected(message)

    def flush(self, timeout: float = 30.0) -> int:
        return self._producer.flush(timeout)

    def close(self) -> None:
        self._producer.flush(30)


def parse_kafka_url(url: str) -> tuple[str, str, dict[str, str]]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC[?chunk_size=N]`` -> (bootstrap, topic, options)."""
    parts = urlsplit(url)
    if parts.scheme != "kafka" or not parts.netloc:
        raise ValueError(f"not a kafka://HOST:PORT/TOPIC URL: {url!r}")
    topic = parts.path.lstrip("/")
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(options) - {"chunk_size"}
    if unknown:
        raise ValueError(f"{url!r}: unknown option(s) {sorted(unknown)} (known: chunk_size)")
    return parts.netloc, topic, options


def open_kafka_sender(url: str, producer: str = "edge") -> KafkaChunkSender:
    """Sender for ``kafka://HOST:PORT/TOPIC``; other settings from ``OBSINGEST_KAFKA_*``."""
    bootstrap, topic, options = parse_kafka_url(url)
    fields: dict[str, Any] = {"bootstrap_servers": bootstrap, **options}  # validated as settings
    return KafkaChunkSender(KafkaProducerSettings(**fields), topic=topic or None, producer_name=producer)
