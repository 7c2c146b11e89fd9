"""Shared helpers of the Reassembler tests: CCDs cut into chunk records, a feeder that numbers
offsets, and a verdict filter."""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from typing import Any

from functions.assembler.reassembly import Reassembler
from obsingest.dataid import DataId
from obsingest.messages import CcdChunk
from producers.kafka.chunker import encode_chunk, iter_chunks

READOUT = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
COMPRESSED = datetime(2026, 11, 22, 3, 0, 1, tzinfo=UTC)
P0, P1 = ("chunks", 0), ("chunks", 1)


def ccd(detector: int, size: int = 10_000, chunk: int = 4096) -> tuple[DataId, bytes, list[bytes]]:
    data_id = DataId("LSSTComCam", 2026112200001, detector)
    data = os.urandom(size)
    records = [encode_chunk(c) for c in iter_chunks(data_id, data, READOUT, COMPRESSED, "edge", chunk)]
    return data_id, data, records


def decode(record: bytes) -> CcdChunk:
    return CcdChunk.decode(record)


def reencode(record: bytes, **changes: Any) -> bytes:
    return encode_chunk(dataclasses.replace(decode(record), **changes))


class Feeder:
    """Feeds records at consecutive offsets per partition, collecting verdicts."""

    def __init__(self, r: Reassembler) -> None:
        self.r = r
        self.next: dict[tuple[str, int], int] = {}

    def __call__(self, record: bytes | None, partition=P0, now: float = 0.0) -> list:
        offset = self.next.get(partition, 0)
        self.next[partition] = offset + 1
        return self.r.feed(record, partition, offset, now=now)


def only(verdicts: list, kind: type):
    assert len(verdicts) == 1, verdicts
    assert isinstance(verdicts[0], kind), verdicts
    return verdicts[0]
