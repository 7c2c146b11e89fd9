"""The assembler's Kafka client configuration (why each setting: functions/assembler/README.md)
and the consumer-group lag queries."""

from __future__ import annotations

from typing import Any

from functions.assembler.settings import AssemblerSettings


def consumer_config(settings: AssemblerSettings, group_id: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": group_id or settings.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": max(1000, settings.session_timeout_ms // 5),
        "max.partition.fetch.bytes": settings.max_record_bytes,
        "fetch.max.bytes": settings.fetch_max_bytes,
        "receive.message.max.bytes": settings.fetch_max_bytes + 1024 * 1024,
        "queued.max.messages.kbytes": settings.prefetch_kbytes,
        "fetch.wait.max.ms": 50,
        **settings.extra,
    }


def dlq_producer_config(settings: AssemblerSettings) -> dict[str, Any]:
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "none",
        "message.max.bytes": settings.max_record_bytes + 64 * 1024,
        "linger.ms": 0,
        **settings.extra,  # the consumer's too: a secured cluster's credentials
    }


def group_lag(bootstrap_servers: str, group_id: str, topic: str, timeout: float = 10.0) -> int:
    """Records of ``topic`` not yet committed by ``group_id`` (0: every file is finished)."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": group_id, "enable.auto.commit": False}
    )
    try:
        meta = probe.list_topics(topic, timeout=timeout)
        parts = [TopicPartition(topic, p) for p in meta.topics[topic].partitions]
        committed = probe.committed(parts, timeout=timeout)
        lag = 0
        for tp in committed:
            low, high = probe.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout)
            start = tp.offset if tp.offset >= 0 else low
            lag += max(0, high - start)
        return lag
    finally:
        probe.close()


def committed_lag(consumer: Any, assigned: list[tuple[str, int]], committed: dict) -> int:
    """Records past this instance's committed offsets, from the cached watermarks (no round trip)."""
    from confluent_kafka import TopicPartition

    lag = 0
    for topic, partition in assigned:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except Exception:  # nothing fetched yet on this partition
            continue
        if high >= 0:
            lag += max(0, high - committed.get((topic, partition), max(low, 0)))
    return lag
