"""Reassembly of CCD files from CcdChunk records, free of I/O: ``feed`` turns a record into
verdicts, ``expire`` applies the timeout, ``safe_offsets`` never passes the first offset of a file
still open or held. **Callers must act on every verdict before committing the offsets after it.**
A resent CCD opens another *copy*; the first to complete wins, the others are dropped, and only
the last to time out is reported ``Incomplete``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

# also imported from here by callers
from functions.assembler.chunks import (
    ChunkPoison,
    PoisonReason,
    chunk_key,
    chunk_stride,
    decode_chunk,
    validate_chunk,
)
from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.messages import CcdChunk

Partition = tuple[str, int]
#: completed files remembered per partition, so their late duplicate chunks are ignored
COMPLETED_MEMORY = 4096
#: missing chunk indices an incomplete file's report lists (the lowest; a record may claim any count)
MISSING_LISTED = 1000
#: copies open or held at once, all partitions: past it, the one whose data id opened first is
#: dead-lettered incomplete. The memory limit counts payload only: a flood of first chunks (a
#: writer gone wrong) grew their bookkeeping past any memory; a night's own are a few hundred
MAX_OPEN_FILES = 10_000


@dataclass(frozen=True)
class Completed:
    """A whole file, checksum verified: store it (create-once)."""

    partition: Partition
    data_id: DataId
    data: bytes
    checksum: str
    readout_time: datetime
    compressed_time: datetime | None
    producer: str
    chunk_count: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class Poison:
    """Dead-letter this: ``value`` is the original record (None for a file-level verdict)."""

    partition: Partition
    offset: int
    reason: str
    error: str
    data_id: str | None = None
    value: bytes | None = None
    first_offset: int | None = None


@dataclass(frozen=True)
class Incomplete:
    """An open file dropped from memory. ``final``: dead-lettered, its offsets are released;
    else (memory pressure) its offsets stay held until it is recovered or times out."""

    partition: Partition
    data_id: str
    chunk_count: int
    missing: list[int]  # the lowest MISSING_LISTED of them
    received: int
    first_offset: int
    last_offset: int
    cause: str  # "memory" | "timeout" | "open-files-limit"
    final: bool
    file_checksum: str


@dataclass(frozen=True)
class Recover:
    """A file dropped for memory has now had every chunk pass by: re-read offsets
    ``first_offset..last_offset`` of ``partition`` for key ``data_id`` (``recovery``)."""

    partition: Partition
    data_id: str
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class Ignored:
    """Nothing to do (duplicate chunk, chunk of a file already completed)."""

    partition: Partition
    offset: int
    data_id: str
    why: str


Verdict = Completed | Poison | Incomplete | Recover | Ignored


@dataclass
class _File:
    """One copy of a file being reassembled; ``parts`` is None once dropped from memory (held)."""

    data_id: DataId
    chunk_count: int
    total_size: int
    file_checksum: str
    readout_time: datetime
    compressed_time: datetime | None
    producer: str
    first_offset: int
    last_offset: int
    last_seen: float
    started: int  # feed sequence number: younger files are evicted first
    stride: int | None = None  # length of every chunk but the last; None until known
    chunk_checksums: dict[int, str] = field(default_factory=dict)
    parts: dict[int, bytes] | None = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.parts.values()) if self.parts else 0

    def missing(self) -> list[int]:
        """The lowest ``MISSING_LISTED`` indices not received, in time bounded by what was."""
        absent = (i for i in range(self.chunk_count) if i not in self.chunk_checksums)
        return list(islice(absent, MISSING_LISTED))

    def partial(self, what: str) -> str:
        """Why this copy is dropped before completing, for its ``Ignored``."""
        got = f"{len(self.chunk_checksums)}/{self.chunk_count} chunks from offset {self.first_offset}"
        return f"partial copy {what} ({got})"

    def fits(self, chunk_count: int, stride: int | None) -> bool:
        """Whether a chunk cut this way can belong to this copy."""
        known = self.stride is None or stride is None or self.stride == stride
        return self.chunk_count == chunk_count and known


@dataclass
class _PartitionState:
    #: data id -> its open or held copies, oldest first (all with the same size and checksum)
    files: dict[str, list[_File]] = field(default_factory=dict)
    next_offset: int | None = None
    #: data id -> file checksum of recently completed files: late duplicates are ignored
    completed: OrderedDict[str, str] = field(default_factory=OrderedDict)


@dataclass
class Reassembler:
    """Per-partition reassembly state machine. Not thread-safe: one consumer loop drives it."""

    memory_limit_bytes: int = 512 * 1024 * 1024
    incomplete_timeout_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    _partitions: dict[Partition, _PartitionState] = field(default_factory=dict, init=False)
    #: payload bytes currently held for incomplete files
    memory_bytes: int = field(default=0, init=False)
    #: copies open or held
    _copies: int = field(default=0, init=False)
    _seq: int = field(default=0, init=False)

    def open_files(self) -> list[str]:
        """Data ids of files open or held; each list() copies in one step, safe while feeding."""
        return sorted(key for state in list(self._partitions.values()) for key in list(state.files))

    def partitions(self) -> list[Partition]:
        return list(self._partitions)

    def safe_offset(self, partition: Partition) -> int | None:
        """Offset up to which ``partition`` may be committed (None: nothing consumed yet)."""
        state = self._partitions.get(partition)
        if state is None or state.next_offset is None:
            return None
        firsts = [f.first_offset for copies in state.files.values() for f in copies]
        return min([*firsts, state.next_offset])

    def safe_offsets(self, partitions: Iterable[Partition] | None = None) -> dict[Partition, int]:
        """``safe_offset`` of each of ``partitions`` (default: all) that consumed something."""
        offsets = {p: self.safe_offset(p) for p in (self._partitions if partitions is None else partitions)}
        return {p: offset for p, offset in offsets.items() if offset is not None}

    def feed(
        self, value: bytes | None, partition: Partition, offset: int, now: float | None = None
    ) -> list[Verdict]:
        """Take one record of ``partition`` at ``offset``; records must come in offset order."""
        now = self.clock() if now is None else now
        state = self._partitions.setdefault(partition, _PartitionState())
        state.next_offset = max(offset + 1, state.next_offset or 0)  # whatever the record is
        try:
            chunk = decode_chunk(value)
        except ChunkPoison as exc:
            return [Poison(partition, offset, exc.reason, str(exc), None, value)]
        try:
            data_id = validate_chunk(chunk)
        except ChunkPoison as exc:
            key = chunk_key(chunk)
            return [Poison(partition, offset, exc.reason, str(exc), key, value)]
        key = data_id.key

        def poison(reason: str, error: str) -> list[Verdict]:
            return [Poison(partition, offset, reason, error, key, value)]

        copies = state.files.get(key)
        if not copies:
            if state.completed.get(key) == chunk.file_checksum:
                return [Ignored(partition, offset, key, "chunk of a file already completed")]
            new = self._open(state, chunk, data_id, offset, now)
            return self._add(partition, state, new, chunk, offset, now)
        first = copies[0]
        if (first.total_size, first.file_checksum) != (chunk.total_size, chunk.file_checksum):
            return poison(
                PoisonReason.FILE_CHANGED,
                f"{key}: chunk {chunk.chunk_index} says {chunk.chunk_count} chunks, "
                f"{chunk.total_size} bytes, {chunk.file_checksum}; the file began at offset "
                f"{first.first_offset} with {first.chunk_count} chunks, "
                f"{first.total_size} bytes, {first.file_checksum}",
            )
        stride = chunk_stride(chunk)
        same_layout = [c for c in copies if c.fits(chunk.chunk_count, stride)]
        for c in same_layout:
            if c.chunk_checksums.get(chunk.chunk_index) == chunk.chunk_checksum:
                c.last_seen = now
                return [Ignored(partition, offset, key, f"duplicate chunk {chunk.chunk_index}")]
        lacking = [c for c in same_layout if chunk.chunk_index not in c.chunk_checksums]
        if lacking:
            return self._add(partition, state, lacking[-1], chunk, offset, now)
        if same_layout:
            known = same_layout[-1].chunk_checksums[chunk.chunk_index]
            return poison(
                PoisonReason.CHUNK_CONFLICT,
                f"{key}: chunk {chunk.chunk_index} again with other bytes "
                f"({chunk.chunk_checksum}, first {known})",
            )
        # the same bytes cut another way: a resend with another chunk size starts a new copy
        new = self._open(state, chunk, data_id, offset, now)
        return self._add(partition, state, new, chunk, offset, now)

    def _add(
        self,
        partition: Partition,
        state: _PartitionState,
        current: _File,
        chunk: CcdChunk,
        offset: int,
        now: float,
    ) -> list[Verdict]:
        """Put ``chunk`` (whose index ``current`` lacks) into that copy."""
        current.chunk_checksums[chunk.chunk_index] = chunk.chunk_checksum
        current.last_offset = offset
        current.last_seen = now
        if current.stride is None:
            current.stride = chunk_stride(chunk)
        if current.parts is None:  # held
            if len(current.chunk_checksums) < current.chunk_count:
                return []
            key = current.data_id.key
            self._forget(state, current)
            superseded = self._drop_copies(partition, state, key, "being recovered")
            self._remember(state, key, current.file_checksum)
            return [Recover(partition, key, current.first_offset, current.last_offset), *superseded]
        current.parts[chunk.chunk_index] = chunk.payload
        self.memory_bytes += len(chunk.payload)
        if len(current.parts) == current.chunk_count:
            return self._complete(partition, state, current)
        return self._enforce_limits()

    def _open(
        self, state: _PartitionState, chunk: CcdChunk, data_id: DataId, offset: int, now: float
    ) -> _File:
        self._seq += 1
        new = _File(
            data_id=data_id,
            chunk_count=chunk.chunk_count,
            total_size=chunk.total_size,
            file_checksum=chunk.file_checksum,
            readout_time=chunk.readout_time,
            compressed_time=chunk.compressed_time,
            producer=chunk.producer,
            first_offset=offset,
            last_offset=offset,
            last_seen=now,
            started=self._seq,
        )
        state.files.setdefault(data_id.key, []).append(new)
        self._copies += 1
        return new

    def _forget(self, state: _PartitionState, f: _File) -> None:
        """Remove one copy (and its payload) from the open files."""
        key = f.data_id.key
        self.memory_bytes -= f.nbytes
        if f.parts is not None:
            f.parts = {}
        copies = state.files.get(key, [])
        kept = [c for c in copies if c is not f]
        self._copies -= len(copies) - len(kept)
        copies[:] = kept
        if not copies:
            state.files.pop(key, None)

    def _drop_copies(
        self, partition: Partition, state: _PartitionState, key: str, winner: str
    ) -> list[Verdict]:
        """Drop every remaining copy of ``key``: another copy won."""
        out: list[Verdict] = []
        for f in list(state.files.get(key, [])):
            self._forget(state, f)
            out.append(
                Ignored(partition, f.first_offset, key, f"{f.partial('dropped')}: another copy is {winner}")
            )
        return out

    def _complete(self, partition: Partition, state: _PartitionState, f: _File) -> list[Verdict]:
        assert f.parts is not None
        data = b"".join(f.parts[i] for i in range(f.chunk_count))
        self._forget(state, f)
        key = f.data_id.key

        def refused(reason: str, error: str) -> list[Verdict]:
            return [Poison(partition, f.last_offset, reason, error, key, None, f.first_offset)]

        if len(data) != f.total_size:
            return refused(
                PoisonReason.FILE_SIZE,
                f"{key}: chunks add up to {len(data)} bytes, total_size says {f.total_size}",
            )
        actual = checksum_str(data)
        if actual != f.file_checksum:
            return refused(
                PoisonReason.FILE_CHECKSUM,
                f"{key}: assembled file has {actual}, chunks say {f.file_checksum}",
            )
        superseded = self._drop_copies(partition, state, key, "complete")
        self._remember(state, key, f.file_checksum)
        done = Completed(
            partition,
            f.data_id,
            data,
            actual,
            f.readout_time,
            f.compressed_time,
            f.producer,
            f.chunk_count,
            f.first_offset,
            f.last_offset,
        )
        return [done, *superseded]

    def _remember(self, state: _PartitionState, key: str, file_checksum: str) -> None:
        state.completed[key] = file_checksum
        state.completed.move_to_end(key)
        while len(state.completed) > COMPLETED_MEMORY:
            state.completed.popitem(last=False)

    def _enforce_limits(self) -> list[Verdict]:
        """Over ``MAX_OPEN_FILES``: give up the copies whose data id opened first. Over the
        memory limit: drop the youngest open copies' payloads (their offsets stay held)."""
        out: list[Verdict] = []
        while self._copies > MAX_OPEN_FILES:
            firsts = [(next(iter(s.files.values()))[0], p, s) for p, s in self._partitions.items() if s.files]
            first, p, state = min(firsts, key=lambda c: c[0].started)
            out.append(self._give_up(p, state, first, "open-files-limit"))
        while self.memory_bytes > self.memory_limit_bytes:
            candidates = [
                (f.started, p, f)
                for p, s in self._partitions.items()
                for copies in s.files.values()
                for f in copies
                if f.parts is not None
            ]
            if not candidates:
                break
            _, p, victim = max(candidates, key=lambda c: c[0])
            self.memory_bytes -= victim.nbytes
            victim.parts = None
            out.append(self._incomplete(p, victim, "memory", final=False))
        return out

    def expire(
        self, now: float | None = None, settled: Callable[[Partition], float] | None = None
    ) -> list[Verdict]:
        """Dead-letter files idle past the timeout, releasing their offsets (a copy whose file
        has another copy open is dropped quietly). With ``settled`` (a partition's latest time
        by which every record it then held has been fed), only files idle past the timeout at
        that time: after a pause or a stall, the missing chunks may be unread yet."""
        now = self.clock() if now is None else now
        out: list[Verdict] = []
        for partition, state in self._partitions.items():
            last = now - self.incomplete_timeout_s
            if not any(f.last_seen <= last for c in state.files.values() for f in c):
                continue
            if settled is not None:
                last = min(last, settled(partition) - self.incomplete_timeout_s)
            for f in [f for c in state.files.values() for f in c if f.last_seen <= last]:
                out.append(self._give_up(partition, state, f, "timeout"))
        return out

    def _give_up(self, partition: Partition, state: _PartitionState, f: _File, cause: str) -> Verdict:
        """Drop the unfinished copy ``f``: reported incomplete, quietly if another copy is open."""
        key = f.data_id.key
        self._forget(state, f)
        if state.files.get(key):
            what = "timed out" if cause == "timeout" else f"dropped ({cause})"
            return Ignored(partition, f.first_offset, key, f"{f.partial(what)} while another copy is open")
        return self._incomplete(partition, f, cause, final=True)

    def next_offset(self, partition: Partition) -> int:
        """The offset after the last record fed from ``partition`` (0: none yet)."""
        state = self._partitions.get(partition)
        return (state.next_offset or 0) if state is not None else 0

    def revoke(self, partitions: Iterable[Partition]) -> dict[Partition, int]:
        """Forget ``partitions`` (rebalance); their safe offsets. Partial files are dropped
        unreported: the next owner re-reads them from there."""
        partitions = list(partitions)
        safe = self.safe_offsets(partitions)
        for partition in partitions:
            state = self._partitions.pop(partition, None)
            if state is not None:
                self.memory_bytes -= sum(f.nbytes for c in state.files.values() for f in c)
                self._copies -= sum(len(c) for c in state.files.values())
        return safe

    @staticmethod
    def _incomplete(partition: Partition, f: _File, cause: str, final: bool) -> Incomplete:
        missing = f.missing()
        return Incomplete(
            partition,
            f.data_id.key,
            f.chunk_count,
            missing,
            len(f.chunk_checksums),
            f.first_offset,
            f.last_offset,
            cause,
            final,
            f.file_checksum,
        )
