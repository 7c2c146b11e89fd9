"""The Reassembler state machine: every verdict, and the offsets it lets a consumer commit."""

from __future__ import annotations

import dataclasses
import os

import pytest

from functions.assembler.reassembly import (
    MAX_OPEN_FILES,
    Completed,
    Ignored,
    Incomplete,
    Poison,
    PoisonReason,
    Reassembler,
    Recover,
)
from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.messages import ArrivalEvent
from producers.kafka.chunker import encode_chunk, iter_chunks
from tests.unit.functions.assembler.reassembly_helpers import (
    COMPRESSED,
    P0,
    P1,
    READOUT,
    Feeder,
    ccd,
    decode,
    only,
    reencode,
)

pytestmark = pytest.mark.unit


def test_single_file_completes_bit_exact_with_metadata():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, records = ccd(3)
    assert feed(records[0]) == []
    assert feed(records[1]) == []
    done = only(feed(records[2]), Completed)
    assert done.data == data
    assert done.data_id == data_id
    assert done.checksum == checksum_str(data)
    assert (done.first_offset, done.last_offset, done.chunk_count) == (0, 2, 3)
    assert (done.readout_time, done.compressed_time, done.producer) == (READOUT, COMPRESSED, "edge")
    assert r.memory_bytes == 0
    assert r.safe_offset(P0) == 3


def test_interleaved_files_each_reassemble():
    r = Reassembler()
    feed = Feeder(r)
    files = [ccd(d, size=9000 + d * 500) for d in range(4)]
    done: dict[DataId, bytes] = {}
    for index in range(3):
        for _, _, records in files:
            for v in feed(records[index]):
                done[v.data_id] = v.data
    assert done == {data_id: data for data_id, data, _ in files}


def test_duplicate_chunks_are_ignored_and_late_duplicates_of_a_completed_file_too():
    r = Reassembler()
    feed = Feeder(r)
    _, data, records = ccd(1)
    feed(records[0])
    assert only(feed(records[0]), Ignored).why == "duplicate chunk 0"
    feed(records[1])
    assert only(feed(records[2]), Completed).data == data
    for record in records:  # a producer re-sending the whole CCD after a lost ack
        only(feed(record), Ignored)
    assert r.open_files() == []
    assert r.safe_offset(P0) == 7


def test_a_resent_file_completes_a_file_whose_producer_died_midway():
    r = Reassembler()
    feed = Feeder(r)
    _, data, records = ccd(2)
    feed(records[0])  # producer crashed after one chunk, then the edge retried the whole CCD
    verdicts = [v for record in records for v in feed(record)]
    assert [type(v) for v in verdicts] == [Ignored, Completed]
    assert verdicts[1].data == data


@pytest.mark.parametrize("index", [-1, 3, 99])
def test_chunk_index_out_of_range_is_poison(index):
    r = Reassembler()
    _, _, records = ccd(1)
    bad = reencode(records[0], chunk_index=index)
    poison = only(r.feed(bad, P0, 0), Poison)
    assert poison.reason == PoisonReason.BAD_CHUNK
    assert poison.value == bad
    assert poison.data_id == "LSSTComCam/2026112200001/001"
    assert r.safe_offset(P0) == 1  # the partition keeps flowing


@pytest.mark.parametrize("change", [{"total_size": 10_001}, {"file_checksum": "crc32c:00000000"}])
def test_file_metadata_changing_mid_file_is_poison_and_the_file_still_completes(change):
    r = Reassembler()
    feed = Feeder(r)
    _, data, records = ccd(1)
    feed(records[0])
    poison = only(feed(reencode(records[1], **change)), Poison)
    assert poison.reason == PoisonReason.FILE_CHANGED
    feed(records[1])
    assert only(feed(records[2]), Completed).data == data


def test_chunk_checksum_mismatch_is_poison():
    r = Reassembler()
    _, _, records = ccd(1)
    chunk = decode(records[1])
    flipped = bytes([chunk.payload[0] ^ 0xFF]) + chunk.payload[1:]  # b"X" was a no-op 1 in 256
    corrupt = encode_chunk(dataclasses.replace(chunk, payload=flipped))
    poison = only(r.feed(corrupt, P0, 5), Poison)
    assert (poison.reason, poison.offset) == (PoisonReason.CHUNK_CHECKSUM, 5)
    assert "chunk 1" in poison.error


def test_same_index_with_other_bytes_is_a_chunk_conflict():
    r = Reassembler()
    feed = Feeder(r)
    _, _, records = ccd(1)
    feed(records[0])
    chunk = decode(records[0])
    other = b"Y" * len(chunk.payload)
    bad = encode_chunk(dataclasses.replace(chunk, payload=other, chunk_checksum=checksum_str(other)))
    assert only(feed(bad), Poison).reason == PoisonReason.CHUNK_CONFLICT


def test_whole_file_checksum_mismatch_is_a_file_level_poison():
    r = Reassembler()
    feed = Feeder(r)
    _, _, records = ccd(1)
    forged = [reencode(rec, file_checksum="crc32c:deadbeef") for rec in records]
    feed(forged[0])
    feed(forged[1])
    poison = only(feed(forged[2]), Poison)
    assert poison.reason == PoisonReason.FILE_CHECKSUM
    assert (poison.value, poison.first_offset, poison.offset) == (None, 0, 2)
    assert r.safe_offset(P0) == 3


def test_chunks_that_do_not_add_up_to_total_size_are_a_file_level_poison():
    r = Reassembler()
    data_id = DataId("LSSTComCam", 2026112200001, 1)
    data = os.urandom(5000)
    [chunk] = iter_chunks(data_id, data, READOUT, None, "edge", 8192)
    lying = dataclasses.replace(chunk, total_size=6000)
    assert only(r.feed(encode_chunk(lying), P0, 0), Poison).reason == PoisonReason.FILE_SIZE


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (b"", PoisonReason.UNDECODABLE),
        (None, PoisonReason.UNDECODABLE),
        (b"not avro at all", PoisonReason.UNDECODABLE),
        (b"\xc3\x01" + b"\x00" * 8 + b"body", PoisonReason.UNDECODABLE),
    ],
)
def test_undecodable_records_are_poison(record, reason):
    r = Reassembler()
    assert only(r.feed(record, P0, 0), Poison).reason == reason


def test_a_record_of_another_contract_is_wrong_schema():
    event = ArrivalEvent(
        dataset_id=__import__("uuid").uuid4(),
        dataset_type="raw",
        run="r",
        instrument="LSSTCam",
        exposure=2026112200001,
        detector=1,
        day_obs=20261122,
        uri="x",
        size=1,
        checksum="c",
        transport="kafka",
        readout_time=READOUT,
        registered_time=READOUT,
        published_time=READOUT,
    )
    r = Reassembler()
    assert only(r.feed(event.encode(), P0, 0), Poison).reason == PoisonReason.WRONG_SCHEMA


def test_unknown_instrument_is_a_bad_data_id():
    _, _, records = ccd(1)
    r = Reassembler()
    bad = reencode(records[0], instrument="HSC")
    assert only(r.feed(bad, P0, 0), Poison).reason == PoisonReason.BAD_DATA_ID


def test_safe_offset_stops_at_the_oldest_open_file_per_partition():
    r = Reassembler()
    feed = Feeder(r)
    _, _, a = ccd(1)
    _, _, b = ccd(2)
    _, _, c = ccd(3)
    assert r.safe_offsets() == {}
    feed(a[0], P0)  # offset 0: A opens
    feed(b[0], P0)  # offset 1: B opens
    feed(c[0], P1)  # P1 offset 0: C opens
    assert r.safe_offsets() == {P0: 0, P1: 0}
    feed(a[1], P0)
    feed(a[2], P0)  # A completes at offset 3; B (first offset 1) still open
    assert r.safe_offset(P0) == 1
    feed(b[1], P0)
    only(feed(b[2], P0), Completed)
    assert r.safe_offset(P0) == 6
    assert r.safe_offset(P1) == 0
    for record in c[1:]:
        feed(record, P1)
    assert r.safe_offsets() == {P0: 6, P1: 3}


def test_memory_bound_drops_the_youngest_file_holds_its_offsets_and_asks_to_recover_it():
    r = Reassembler(memory_limit_bytes=10_000)
    feed = Feeder(r)
    _, data_a, a = ccd(1)
    _, _, b = ccd(2)
    feed(a[0])
    feed(b[0])
    assert r.memory_bytes == 8192
    evicted = only(feed(a[1]), Incomplete)  # 12288 > 10000: B (youngest) is dropped
    assert (evicted.data_id, evicted.cause, evicted.final) == (
        "LSSTComCam/2026112200001/002",
        "memory",
        False,
    )
    assert evicted.missing == [1, 2]
    assert r.memory_bytes == 8192
    assert r.safe_offset(P0) == 0
    assert only(feed(a[2]), Completed).data == data_a
    assert r.safe_offset(P0) == 1  # held at B's first offset although B has no payload here
    assert feed(b[1]) == []
    recover = only(feed(b[2]), Recover)
    assert (recover.data_id, recover.first_offset, recover.last_offset) == (
        "LSSTComCam/2026112200001/002",
        1,
        5,
    )
    assert r.safe_offset(P0) == 6  # released: the caller re-reads B before committing
    only(feed(b[0]), Ignored)  # and B counts as done for late duplicates


def test_a_recovery_reassembler_rebuilds_dropped_files_from_their_offsets():
    """What the service does with a Recover verdict: re-read only that key's records."""
    r = Reassembler(memory_limit_bytes=5000)  # less than two chunks: both files get dropped
    data_id_a, data_a, a = ccd(1)
    data_id_b, data_b, b = ccd(2)
    log = [(offset, rec) for offset, rec in enumerate([a[0], b[0], a[1], b[1], a[2], b[2]])]
    verdicts = [v for offset, record in log for v in r.feed(record, P0, offset)]
    evicted = [v.data_id for v in verdicts if isinstance(v, Incomplete)]
    assert evicted == [data_id_b.key, data_id_a.key]
    recovers = [v for v in verdicts if isinstance(v, Recover)]
    assert [(v.data_id, v.first_offset, v.last_offset) for v in recovers] == [
        (data_id_a.key, 0, 4),
        (data_id_b.key, 1, 5),
    ]
    assert r.memory_bytes == 0
    for rec, data in zip(recovers, (data_a, data_b), strict=True):
        fresh = Reassembler(memory_limit_bytes=1 << 40)
        rebuilt = [
            v
            for offset, record in log
            if rec.first_offset <= offset <= rec.last_offset and decode(record).data_id.key == rec.data_id
            for v in fresh.feed(record, P0, offset)
        ]
        assert only(rebuilt, Completed).data == data


def test_timeout_dead_letters_an_idle_file_with_missing_chunks_and_releases_its_offsets():
    r = Reassembler(incomplete_timeout_s=30)
    feed = Feeder(r)
    _, _, a = ccd(1)
    _, data_b, b = ccd(2)
    feed(a[0], now=0)
    feed(a[2], now=1)
    feed(b[0], now=10)
    assert r.expire(now=25) == []
    [dropped] = r.expire(now=31)
    assert isinstance(dropped, Incomplete)
    assert (dropped.final, dropped.cause, dropped.missing, dropped.received) == (True, "timeout", [1], 2)
    assert (dropped.first_offset, dropped.last_offset) == (0, 1)
    assert r.safe_offset(P0) == 2  # B (offset 2) is the oldest open file now
    assert r.memory_bytes == 4096
    feed(b[1], now=32)
    assert only(feed(b[2], now=33), Completed).data == data_b


def test_a_flood_of_first_chunks_is_bounded_by_giving_up_the_file_opened_first():
    # the memory limit counts payload only: first chunks of ever new CCDs (one byte each, a
    # writer gone wrong) grew the per-file bookkeeping without bound until the process was
    # killed for memory, and again after each restart (the commit held at the first of them)
    r = Reassembler()
    feed = Feeder(r)
    _, _, records = ccd(0, size=2, chunk=1)
    flood = [
        reencode(records[0], instrument="LSSTCam", exposure=2026112200001 + i // 189, detector=i % 189)
        for i in range(MAX_OPEN_FILES + 1)
    ]
    dropped = only([v for record in flood for v in feed(record)], Incomplete)
    first = DataId("LSSTCam", 2026112200001, 0).key
    assert (dropped.data_id, dropped.cause, dropped.final, dropped.missing) == (
        first,
        "open-files-limit",
        True,
        [1],
    )
    assert len(r.open_files()) == MAX_OPEN_FILES
    assert r.safe_offset(P0) == 1  # released: reported, the commit passes it


def test_duplicates_keep_an_open_file_alive():
    r = Reassembler(incomplete_timeout_s=30)
    feed = Feeder(r)
    _, _, a = ccd(1)
    feed(a[0], now=0)
    feed(a[0], now=20)
    assert r.expire(now=40) == []
    assert len(r.expire(now=50)) == 1


def test_revoke_drops_partial_files_and_returns_only_safe_offsets():
    r = Reassembler()
    feed = Feeder(r)
    _, _, a = ccd(1)
    _, _, b = ccd(2)
    _, _, c = ccd(3)
    for record in a:
        feed(record, P0)  # A complete: offsets 0..2
    feed(b[0], P0)  # B open at 3
    feed(c[0], P1)
    assert r.revoke([P0]) == {P0: 3}
    assert r.open_files() == ["LSSTComCam/2026112200001/003"]
    assert r.memory_bytes == 4096
    assert r.safe_offsets() == {P1: 0}
    # the new owner of P0 starts from offset 3 and gets B whole
    owner = Reassembler()
    verdicts = [v for off, rec in enumerate(b, start=3) for v in owner.feed(rec, P0, off)]
    assert only(verdicts, Completed).first_offset == 3
