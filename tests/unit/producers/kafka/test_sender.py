"""The sender's delivery tracking and error classes, against an in-process fake producer."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, ClassVar, cast

import pytest
from confluent_kafka import KafkaError

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, PermanentError, RetriableError
from obsingest.fits import header_bytes, make_card, padded
from obsingest.messages import CcdChunk
from producers.kafka import (
    ChunkDeliveryFailed,
    ChunkRejected,
    KafkaChunkSender,
    KafkaProducerSettings,
    open_kafka_sender,
    parse_kafka_url,
    producer_config,
)
from tests.fixtures.kafka_fatal import MOCK_CLUSTER, inject_fatal_error

pytestmark = pytest.mark.unit

DATA_ID = DataId("LSSTComCam", 2026112200001, 4)


def fits_bytes(n: int) -> bytes:
    """A whole FITS file (what a sender accepts: ``check_ccd_bytes``) with ``n`` random data
    bytes, whose header says it is DATA_ID as the camera says it."""
    identity = DATA_ID.identity()
    cards = [
        make_card("SIMPLE", True),
        make_card("BITPIX", 8),
        make_card("NAXIS", 1),
        make_card("NAXIS1", n),
        make_card("INSTRUME", "comCam"),
        make_card("OBSID", identity.obs_id),
        make_card("RAFTBAY", identity.raft),
        make_card("CCDSLOT", identity.sensor),
    ]
    return header_bytes(cards) + os.urandom(n) + bytes(padded(n) - n)


READOUT = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


class FakeMessage:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeProducer:
    """Records produce() calls; delivery reports are served on poll(), like librdkafka."""

    def __init__(self, fail_at: int | None = None, error: KafkaError | None = None) -> None:
        self.records: list[tuple[str, bytes, bytes]] = []
        self.pending: list = []
        self.fail_at, self.error = fail_at, error

    def produce(self, topic, value, key, on_delivery):
        index = len(self.records)
        self.records.append((topic, key, value))
        err = self.error if index == self.fail_at else None
        self.pending.append((on_delivery, err, FakeMessage(2, 100 + index)))

    def poll(self, _timeout=0):
        served, self.pending = self.pending, []
        for callback, err, msg in served:
            callback(err, msg)
        return len(served)

    def flush(self, _timeout=0):
        self.poll()
        return 0


def sender(fake: FakeProducer, chunk_size: int = 4096) -> KafkaChunkSender:
    settings = KafkaProducerSettings(chunk_size=chunk_size, delivery_timeout_s=1)
    return KafkaChunkSender(settings, topic="chunks", producer_name="edge-7", producer=cast(Any, fake))


def test_send_returns_acked_only_after_every_chunk_is_acknowledged():
    fake = FakeProducer()
    data = fits_bytes(8000)  # 11,520 bytes with its header and padding: 3 chunks of 4,096
    result = sender(fake).send(DATA_ID, data, READOUT)
    assert result.status == "acked"
    assert result.checksum == checksum_str(data)
    assert result.object_name == DATA_ID.object_name()
    assert (result.chunks, result.partition, result.first_offset, result.last_offset) == (3, 2, 100, 102)
    assert {key for _, key, _ in fake.records} == {DATA_ID.key.encode()}
    decoded = [CcdChunk.decode(value) for _, _, value in fake.records]
    assert b"".join(c.payload for c in decoded) == data
    assert {c.producer for c in decoded} == {"edge-7"}


def test_a_retriable_delivery_error_raises_a_retriable_error():
    fake = FakeProducer(fail_at=1, error=KafkaError(KafkaError._MSG_TIMED_OUT))
    with pytest.raises(ChunkDeliveryFailed) as info:
        sender(fake).send(DATA_ID, fits_bytes(10_000), READOUT)
    assert isinstance(info.value, RetriableError)
    assert DATA_ID.key in str(info.value)


def test_a_refused_record_raises_a_permanent_error():
    fake = FakeProducer(fail_at=0, error=KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    with pytest.raises(ChunkRejected) as info:
        sender(fake).send(DATA_ID, fits_bytes(5000), READOUT)
    assert isinstance(info.value, PermanentError)


def test_url_parsing_and_chunk_size_option():
    assert parse_kafka_url("kafka://h1:9092,h2:9092/ccd-chunks?chunk_size=65536") == (
        "h1:9092,h2:9092",
        "ccd-chunks",
        {"chunk_size": "65536"},
    )
    with pytest.raises(ValueError):
        parse_kafka_url("kafka://h:1/t?linger=5")
    with pytest.raises(ValueError):
        parse_kafka_url("file:///tmp")
    s = open_kafka_sender("kafka://127.0.0.1:1/my-topic?chunk_size=65536", producer="p")
    try:
        assert (s.topic, s.chunk_size, s.settings.bootstrap_servers) == ("my-topic", 65536, "127.0.0.1:1")
    finally:
        s.flush(0)


def test_producer_config_is_idempotent_acks_all_uncompressed(monkeypatch):
    monkeypatch.setenv("OBSINGEST_KAFKA_LINGER_MS", "7")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker:1")
    cfg = producer_config(KafkaProducerSettings(), "edge")
    assert cfg["enable.idempotence"] is True
    assert cfg["acks"] == "all"
    assert cfg["compression.type"] == "none"
    assert cfg["message.max.bytes"] == 16 * 1024 * 1024
    assert cfg["linger.ms"] == 7
    assert cfg["bootstrap.servers"] == "broker:1"


def test_bytes_that_are_not_a_whole_fits_file_are_never_sent() -> None:
    fake = FakeProducer()
    with pytest.raises(CorruptFile, match=r"LSSTComCam/2026112200001/004: not sent: truncated"):
        sender(fake).send(DATA_ID, fits_bytes(10_000)[:-2880], READOUT)
    assert fake.records == []


class FatalOnceProducer(FakeProducer):
    """librdkafka after a fatal error: that delivery fails, and every later produce() raises the
    fatal error again (the instance never sends again)."""

    made: ClassVar[list[FatalOnceProducer]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        fatal = not FatalOnceProducer.made
        super().__init__(fail_at=0 if fatal else None, error=KafkaError(KafkaError._FENCED, fatal=True))
        self.config = config
        FatalOnceProducer.made.append(self)

    def produce(self, topic, value, key, on_delivery):
        if self.fail_at is not None and self.records:
            from confluent_kafka import KafkaException

            raise KafkaException(self.error)
        super().produce(topic, value, key, on_delivery)


def test_a_fatal_error_replaces_the_producer_instead_of_failing_every_ccd_after(monkeypatch):
    """A fatal error (fenced, out of sequence) ends a librdkafka producer for good: the edge
    resends every CCD through it for ever, an outage that never ends without a restart."""
    import confluent_kafka

    FatalOnceProducer.made = []
    monkeypatch.setattr(confluent_kafka, "Producer", FatalOnceProducer)
    settings = KafkaProducerSettings(chunk_size=4096, delivery_timeout_s=1)
    s = KafkaChunkSender(settings, topic="chunks", producer_name="edge-7")
    with pytest.raises(PermanentError, match="chunk not delivered"):
        s.send(DATA_ID, fits_bytes(8000), READOUT)
    assert s.send(DATA_ID, fits_bytes(8000), READOUT).status == "acked"
    assert len(FatalOnceProducer.made) == 2
    assert FatalOnceProducer.made[1].config["client.id"] == "edge-7"


class RepartitionedProducer(FakeProducer):
    """The topic gained partitions while a CCD was being produced: the key maps elsewhere from
    the second chunk on (librdkafka partitions at produce() with the metadata it has then)."""

    def poll(self, _timeout=0):
        served, self.pending = self.pending, []
        for callback, err, msg in served:
            callback(err, FakeMessage(2 if msg.offset() == 100 else 5, msg.offset()))
        return len(served)


def test_a_ccd_whose_chunks_landed_in_two_partitions_is_not_acked():
    """The assembler rebuilds a CCD from one partition: one split by a partition increase is
    never completed there (dead-lettered as incomplete), yet every chunk was acknowledged and
    send() said acked, so the edge never sent it again."""
    with pytest.raises(ChunkDeliveryFailed, match="partitions"):
        sender(RepartitionedProducer()).send(DATA_ID, fits_bytes(8000), READOUT)


class FatalInFlight:
    """A real producer that meets its fatal error while the first CCD is waiting for acks."""

    def __init__(self, producer: Any) -> None:
        self.producer, self.injected = producer, False

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.producer.produce(*args, **kwargs)

    def poll(self, timeout: float) -> int:
        if not self.injected:
            self.injected = True
            inject_fatal_error(self.producer)
        return cast(int, self.producer.poll(timeout))


@pytest.mark.parametrize("when", ["between sends", "in flight"])
def test_a_real_librdkafka_fatal_error_replaces_the_producer(when):
    """librdkafka (in-process mock cluster) after a fatal error: the poll serving it raises
    it (a SystemError if a delivery report follows), the CCD in flight is purged, every later
    produce() raises _FATAL, and none of these has fatal() set. The sender still replaces the
    producer, and the CCD that met it fails with a sender error: before, the in-flight one
    raised librdkafka's exception raw and every later send failed through the dead producer."""
    from confluent_kafka import Producer

    settings = KafkaProducerSettings(chunk_size=4096, delivery_timeout_s=5, extra=MOCK_CLUSTER)
    real = Producer(producer_config(settings, "edge-7"))
    first: Any = FatalInFlight(real) if when == "in flight" else real
    s = KafkaChunkSender(settings, topic="chunks", producer_name="edge-7", producer=first)
    if when == "between sends":
        assert s.send(DATA_ID, fits_bytes(8000), READOUT).status == "acked"
        inject_fatal_error(real)
    with pytest.raises((RetriableError, PermanentError)):  # what the edge judges; never raw
        s.send(DATA_ID, fits_bytes(8000), READOUT)
    assert s._producer is not first
    assert s.send(DATA_ID, fits_bytes(8000), READOUT).status == "acked"
    s.close()
