"""The Reassembler with copies of one CCD: a complete resend wins over an abandoned partial,
whatever its chunk size; offsets stay safe; different bytes still follow the conflict rules."""

from __future__ import annotations

import pytest

from functions.assembler.reassembly import (
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
from producers.kafka.chunker import encode_chunk, iter_chunks
from tests.unit.functions.assembler.reassembly_helpers import (
    COMPRESSED,
    P0,
    READOUT,
    Feeder,
    ccd,
    only,
    reencode,
)

pytestmark = pytest.mark.unit


# -- copies: a complete resend wins over an abandoned partial, whatever its chunk size ---------
def cut(data_id: DataId, data: bytes, chunk: int) -> list[bytes]:
    """The records of one CCD cut with chunk size ``chunk``."""
    return [encode_chunk(c) for c in iter_chunks(data_id, data, READOUT, COMPRESSED, "edge", chunk)]


def test_a_complete_resend_with_another_chunk_size_wins_over_an_abandoned_partial():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(4, size=14_000)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    assert (len(partial), len(resend)) == (4, 2)
    feed(partial[0])  # offsets 0, 1: the producer died after two of four chunks
    feed(partial[1])
    assert feed(resend[0]) == []  # offset 2: the edge resends the CCD cut in two
    assert r.safe_offset(P0) == 0  # both copies open: the commit stays at the partial's start
    done, dropped = feed(resend[1])
    assert isinstance(done, Completed) and isinstance(dropped, Ignored)
    assert (done.data, done.checksum) == (data, checksum_str(data))
    assert (done.first_offset, done.last_offset, done.chunk_count) == (2, 3, 2)
    assert (dropped.offset, dropped.data_id) == (0, data_id.key)
    assert "partial copy dropped (2/4 chunks from offset 0)" in dropped.why
    assert r.open_files() == [] and r.memory_bytes == 0
    assert r.safe_offset(P0) == 4
    for record in partial[2:]:  # the dead producer's chunks turn up after all
        assert only(feed(record), Ignored).why == "chunk of a file already completed"


def test_a_resend_with_the_same_chunk_count_but_another_chunk_size_completes():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(5, size=10_000)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 4000)
    assert len(partial) == len(resend) == 3  # same count, chunk 0 differs: not a conflict
    feed(partial[0])
    feed(partial[1])
    assert feed(resend[0]) == [] and feed(resend[1]) == []
    done, dropped = feed(resend[2])
    assert isinstance(done, Completed) and done.data == data and done.first_offset == 2
    assert isinstance(dropped, Ignored) and dropped.offset == 0


def test_copies_of_two_chunk_sizes_interleaved_each_collect_their_own_chunks():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(6, size=10_000)
    a, b = cut(data_id, data, 4096), cut(data_id, data, 4000)
    verdicts = [v for record in (a[0], b[0], a[1], b[1]) for v in feed(record)]
    assert verdicts == []
    done, dropped = feed(b[2])
    assert isinstance(done, Completed) and done.data == data
    assert (done.first_offset, dropped.offset) == (1, 0)


def test_the_first_copy_to_complete_wins_even_the_older_one():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(7, size=14_000)
    slow, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    feed(slow[0])
    feed(slow[1])
    feed(slow[2])
    feed(resend[0])  # offset 3
    done, dropped = feed(slow[3])  # the slow producer finishes first
    assert isinstance(done, Completed) and done.data == data and done.first_offset == 0
    assert isinstance(dropped, Ignored) and dropped.offset == 3
    assert only(feed(resend[1]), Ignored).why == "chunk of a file already completed"
    assert r.safe_offset(P0) == 6


def test_a_commit_never_passes_a_copy_or_another_file_still_open():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(8, size=14_000)
    _, _, other = ccd(0)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    feed(partial[0])  # offset 0
    feed(other[0])  # offset 1: another CCD opens
    feed(resend[0])  # offset 2
    assert r.safe_offset(P0) == 0
    assert isinstance(feed(resend[1])[0], Completed)  # offset 3
    assert r.safe_offset(P0) == 1  # the partial is gone, the other CCD still holds
    feed(other[1])
    only(feed(other[2]), Completed)
    assert r.safe_offset(P0) == 6


def test_a_resend_with_different_bytes_still_follows_the_conflict_rules():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(1, size=14_000)
    feed(cut(data_id, data, 4096)[0])
    changed = cut(data_id, bytes([data[0] ^ 0xFF]) + data[1:], 8192)  # never the same bytes
    for record in changed:
        assert only(feed(record), Poison).reason == PoisonReason.FILE_CHANGED
    assert r.open_files() == [data_id.key] and r.safe_offset(P0) == 0


def test_a_chunk_lying_about_the_chunk_count_opens_a_copy_that_the_real_file_drops():
    r = Reassembler()
    feed = Feeder(r)
    _, data, records = ccd(2)
    feed(records[0])
    assert feed(reencode(records[1], chunk_count=4)) == []  # another cut of the same bytes?
    feed(records[1])
    done, dropped = feed(records[2])
    assert isinstance(done, Completed) and done.data == data
    assert dropped.offset == 1 and dropped.why.startswith("partial copy dropped (1/4 chunks")


def test_only_the_last_copy_to_time_out_is_reported_incomplete():
    r = Reassembler(incomplete_timeout_s=30)
    feed = Feeder(r)
    data_id, data, _ = ccd(3, size=14_000)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    feed(partial[0], now=0)
    feed(resend[0], now=20)  # the resend dies too
    [quiet] = r.expire(now=31)  # the partial times out while the resend is still open
    assert isinstance(quiet, Ignored) and quiet.offset == 0
    assert "timed out (1/4 chunks from offset 0) while another copy is open" in quiet.why
    assert r.safe_offset(P0) == 1
    [report] = r.expire(now=51)
    assert isinstance(report, Incomplete) and report.final
    assert (report.first_offset, report.chunk_count, report.missing) == (1, 2, [1])
    assert r.open_files() == [] and r.memory_bytes == 0


def test_a_resend_that_completes_after_the_partial_timed_out_is_stored():
    r = Reassembler(incomplete_timeout_s=30)
    feed = Feeder(r)
    data_id, data, _ = ccd(4, size=14_000)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    feed(partial[0], now=0)
    feed(resend[0], now=29)
    assert [type(v) for v in r.expire(now=31)] == [Ignored]
    done = only(feed(resend[1], now=32), Completed)
    assert done.data == data


def test_a_resend_dropped_for_memory_is_recovered_and_the_partial_dropped():
    r = Reassembler(memory_limit_bytes=10_000)
    feed = Feeder(r)
    data_id, data, _ = ccd(5, size=14_000)
    partial, resend = cut(data_id, data, 4096), cut(data_id, data, 8192)
    log = [partial[0], resend[0], resend[1]]
    feed(log[0])
    evicted = only(feed(log[1]), Incomplete)  # 4096 + 8192 > 10000: the resend is youngest
    assert (evicted.first_offset, evicted.final, evicted.cause) == (1, False, "memory")
    recover, dropped = feed(log[2])
    assert isinstance(recover, Recover) and (recover.first_offset, recover.last_offset) == (1, 2)
    assert isinstance(dropped, Ignored) and dropped.offset == 0
    assert r.open_files() == [] and r.memory_bytes == 0 and r.safe_offset(P0) == 3
    fresh = Reassembler()  # what the service does with Recover: re-read that offset range
    rebuilt = [v for off in range(1, 3) for v in fresh.feed(log[off], P0, off)]
    assert only(rebuilt, Completed).data == data


def test_a_resend_cut_the_same_way_merges_into_the_partial():
    r = Reassembler()
    feed = Feeder(r)
    data_id, data, _ = ccd(6, size=14_000)
    partial = cut(data_id, data, 4096)
    feed(partial[0])
    feed(partial[1])
    verdicts = [v for record in partial for v in feed(record)]
    assert [type(v) for v in verdicts] == [Ignored, Ignored, Completed]
    assert verdicts[2].data == data and verdicts[2].first_offset == 0
