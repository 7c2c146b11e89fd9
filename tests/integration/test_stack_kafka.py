"""Kafka for real: big Avro records survive a produce/consume round trip byte for byte."""

from __future__ import annotations

import io
import os
import time
from typing import Any, cast

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from tests.integration.fixtures.handles import KafkaService

pytestmark = pytest.mark.integration

SCHEMA = parse_schema(
    {
        "type": "record",
        "name": "Blob",
        "namespace": "obsingest.test",
        "fields": [{"name": "id", "type": "string"}, {"name": "payload", "type": "bytes"}],
    }
)


def _encode(record: dict) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, SCHEMA, record)
    return buf.getvalue()


def _round_trip(kafka: KafkaService, value: bytes, key: bytes) -> bytes:
    from confluent_kafka import Consumer, KafkaException, Producer

    topic = kafka.new_topic("avro-big")
    producer = Producer(kafka.producer_config())
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err:
            errors.append(err)

    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
    assert producer.flush(30) == 0, "producer did not deliver within 30 s"
    assert not errors, errors

    consumer = Consumer(kafka.consumer_config())
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            assert msg.key() == key
            got = msg.value()
            assert got is not None
            return bytes(got)
        raise AssertionError("no record consumed within 30 s")
    finally:
        consumer.close()


def test_one_mib_avro_record_round_trips_byte_exact(kafka: KafkaService) -> None:
    payload = os.urandom(1024 * 1024)
    value = _encode({"id": "LSSTCam/2025061200001/42", "payload": payload})
    assert len(value) > 1024 * 1024

    got = _round_trip(kafka, value, key=b"LSSTCam/2025061200001/42")

    assert got == value
    decoded = cast(dict[str, Any], schemaless_reader(io.BytesIO(got), SCHEMA, SCHEMA))
    assert decoded["payload"] == payload


def test_broker_accepts_eight_mib_chunk_records(kafka: KafkaService) -> None:
    value = _encode({"id": "chunk", "payload": os.urandom(8 * 1024 * 1024)})
    assert _round_trip(kafka, value, key=b"chunk") == value


def test_new_topic_names_are_unique_and_created(kafka: KafkaService) -> None:
    a, b = kafka.new_topic("ns"), kafka.new_topic("ns")
    assert a != b
    topics = kafka.admin().list_topics(timeout=10).topics
    assert a in topics and b in topics
