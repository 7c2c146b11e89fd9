"""A complete resend of a CCD with another chunk size wins over the abandoned partial, on a real
broker: the edge's producer died after part of the CCD went out cut one way, the retried
sender cut it another way. The file must be stored exactly once, with its bytes, and the
consumer group's commit must reach the end of the topic (nothing left behind, nothing held)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from functions.assembler.service import AssemblerService, group_lag
from functions.assembler.settings import AssemblerSettings
from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import MetadataKeys
from producers.kafka import encode_chunk, iter_chunks
from tests.integration.fixtures.handles import KafkaService, unique_name

pytestmark = pytest.mark.integration

READOUT = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
EXPOSURE = 2026112200042


def cut(data_id: DataId, data: bytes, chunk_size: int) -> list[bytes]:
    return [encode_chunk(c) for c in iter_chunks(data_id, data, READOUT, None, "edge-1", chunk_size)]


def produce(kafka: KafkaService, topic: str, records: list[tuple[DataId, bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(kafka.producer_config(**{"enable.idempotence": True}))
    errors: list = []

    def on_delivery(err: object, _m: object) -> None:
        if err:
            errors.append(err)

    for data_id, value in records:
        producer.produce(topic, value=value, key=data_id.key.encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0 and not errors, errors


def end_offsets(kafka: KafkaService, group: str, topic: str) -> tuple[int, int]:
    """(committed offset of ``group``, high watermark) of partition 0 of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(kafka.consumer_config(group_id=group))
    try:
        [committed] = probe.committed([TopicPartition(topic, 0)], timeout=10)
        _, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return committed.offset, high
    finally:
        probe.close()


def run_until_idle(service: AssemblerService, records: int, idle_s: float, timeout: float) -> None:
    """Drive the service in this thread until it has handled ``records`` records and has been
    idle (no open file, no store in flight) for ``idle_s``; then close it (final commit)."""
    deadline = time.monotonic() + timeout
    try:
        service.subscribe()
        while not (service.metrics.count("assembler", "records") >= records and service.idle_for() >= idle_s):
            assert time.monotonic() < deadline, (
                f"not idle after {timeout} s: {service.counts()}, open {service.reassembler.open_files()}"
            )
            service.poll_once(0.2)
    finally:
        service.close()


def test_a_complete_resend_with_another_chunk_size_is_stored_once(kafka, tmp_path: Path):
    topic = kafka.new_topic("chunks", partitions=1)
    dlq = kafka.new_topic("chunks-dlq")
    group = unique_name("assembler")
    store_dir = tmp_path / "store"
    ccd, other = DataId("LSSTComCam", EXPOSURE, 4), DataId("LSSTComCam", EXPOSURE, 5)
    data, other_data = os.urandom(100_000), os.urandom(30_000)
    partial = cut(ccd, data, 16 * 1024)  # 7 chunks; the producer dies after 3
    resend = cut(ccd, data, 40 * 1024)  # 3 chunks: the retry, cut another way
    assert (len(partial), len(resend)) == (7, 3)
    stream = [
        *((ccd, r) for r in partial[:3]),
        *((other, r) for r in cut(other, other_data, 16 * 1024)),  # a CCD in between
        *((ccd, r) for r in resend),
    ]
    produce(kafka, topic, stream)

    settings = AssemblerSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        topic=topic,
        dlq_topic=dlq,
        group_id=group,
        store_url=f"file://{store_dir}",
        session_timeout_ms=6000,
        # short, so that code that keeps the partial open (and refuses the resend) ends the
        # run within the test's time by dead-lettering it, and the asserts below fail
        incomplete_timeout_s=5.0,
    )
    service = AssemblerService(settings)
    run_until_idle(service, records=len(stream), idle_s=1.0, timeout=90)

    store = LocalDirStore(store_dir)
    assert store.read(ccd.object_name()) == data
    assert store.read(other.object_name()) == other_data
    meta = store.stat(ccd.object_name()).metadata
    assert meta[MetadataKeys.CHECKSUM] == checksum_str(data)
    # stored once: one create, one finalize notification per object, nothing dead-lettered
    counts = service.counts()
    assert (counts["stored"], counts["existing"], counts["conflicts"]) == (2, 0, 0)
    assert len(list((store_dir / ".notifications").glob("*.json"))) == 2
    assert (counts["poison"], counts["incomplete"]) == (0, 0)
    assert end_offsets(kafka, group, dlq)[1] == 0  # the DLQ stayed empty
    committed, high = end_offsets(kafka, group, topic)
    assert committed == high == len(stream)
    assert group_lag(kafka.bootstrap_servers, group, topic) == 0
