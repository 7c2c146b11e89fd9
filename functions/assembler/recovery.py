"""Re-reading one file dropped from memory with a private consumer (the group's offsets never
move for it); the service acts on its verdicts as if it had been assembled in place."""

from __future__ import annotations

import time
import uuid

from functions.assembler.kafka_clients import consumer_config
from functions.assembler.reassembly import (
    ChunkPoison,
    Completed,
    Poison,
    Reassembler,
    Recover,
    Verdict,
    decode_chunk,
)
from functions.assembler.settings import AssemblerSettings
from obsingest.errors import ObsIngestError, RetriableError

#: seconds a re-read may take before the instance gives up
REREAD_TIMEOUT_S = 60.0


class RecoveryFailed(RetriableError, reason="recovery-failed"):
    """Re-reading a file dropped from memory did not yield it; a restart re-reads it."""


def reread(settings: AssemblerSettings, rec: Recover) -> list[Verdict]:
    """The final verdicts (Completed, or a file-level Poison) of the dropped file ``rec``."""
    from confluent_kafka import Consumer, TopicPartition

    cfg = consumer_config(settings, group_id=f"{settings.group_id}-recovery-{uuid.uuid4().hex[:8]}")
    cfg.pop("partition.assignment.strategy")
    reader = Consumer(cfg)
    fresh = Reassembler(memory_limit_bytes=1 << 62, incomplete_timeout_s=float("inf"))
    verdicts: list[Verdict] = []
    key = rec.data_id.encode()
    deadline = time.monotonic() + REREAD_TIMEOUT_S
    try:
        reader.assign([TopicPartition(*rec.partition, rec.first_offset)])
        position = rec.first_offset
        while position <= rec.last_offset:
            if time.monotonic() > deadline:
                raise RecoveryFailed(
                    f"{rec.data_id}: offsets {position}..{rec.last_offset} "
                    f"not re-read within {REREAD_TIMEOUT_S:.0f} s"
                )
            msg = reader.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            offset = msg.offset()
            assert offset is not None  # a record, not an error event: it has its offset
            position = offset + 1
            if msg.key() == key or _names(msg.value(), rec.data_id):
                verdicts += fresh.feed(msg.value(), rec.partition, offset)
    finally:
        reader.close()
    finished: list[Verdict] = [
        v for v in verdicts if isinstance(v, Completed) or (isinstance(v, Poison) and v.value is None)
    ]
    if not finished:
        raise RecoveryFailed(f"{rec.data_id}: re-read did not complete the file")
    return finished


def _names(value: bytes | None, data_id: str) -> bool:
    """Whether a record keyed otherwise is a chunk of ``data_id`` (keys are only a convention)."""
    try:
        return decode_chunk(value).data_id.key == data_id
    except (ChunkPoison, ObsIngestError):
        return False
