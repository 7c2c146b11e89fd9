"""Reassembly of CCD files from CcdChunk records: the assembler's logic, free of I/O.

``Reassembler.feed(value, partition, offset)`` takes one Kafka record and returns verdicts: a
``Completed`` file (verified, ready to store), ``Poison`` (to dead-letter), ``Incomplete`` (an
open file dropped from memory, with the missing chunk indices) or ``Recover`` (a file dropped
from memory whose chunks have since all passed by: re-read it). ``expire(now)`` applies the
timeout. ``safe_offsets()`` says, per partition, how far the consumer may commit.

The offset rule: a partition's commit never passes the first offset of a file that is still
open or held (dropped for memory and not yet recovered). Everything below that offset belongs
to files that were completed, dead-lettered or ignored, so a consumer restarting from it re-reads
every chunk of every unfinished file and nothing else of consequence; files it sees complete
again are rewritten create-once, i.e. a no-op. **Callers must act on every verdict (store,
dead-letter, recover) before committing the offsets computed after it.**
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import BadMessage, BadObjectName, ObsIngestError, PermanentError
from obsingest.messages import CcdChunk

Partition = Hashable


class PoisonReason:
    """``dlq_reason`` header values of dead-lettered records."""

    UNDECODABLE = "undecodable"
    WRONG_SCHEMA = "wrong-schema"
    BAD_DATA_ID = "bad-data-id"
    BAD_CHUNK = "bad-chunk"  # index out of range, count < 1, negative size
    CHUNK_CHECKSUM = "chunk-checksum-mismatch"
    CHUNK_CONFLICT = "chunk-conflict"  # same index again with different bytes
    FILE_CHANGED = "file-metadata-changed"  # count / size / file checksum changed mid-file
    FILE_CHECKSUM = "file-checksum-mismatch"
    FILE_SIZE = "file-size-mismatch"
    INCOMPLETE = "incomplete"


class ChunkPoison(PermanentError):
    """One record (or one assembled file) that can never become a valid CCD."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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
    missing: list[int]
    received: int
    first_offset: int
    last_offset: int
    cause: str  # "memory" | "timeout" | "revoked"
    final: bool
    file_checksum: str


@dataclass(frozen=True)
class Recover:
    """A file dropped for memory has now had every chunk pass by: re-read offsets
    ``first_offset..last_offset`` of ``partition`` for key ``data_id`` and feed them to a fresh
    Reassembler (``functions.assembler.service`` does this with a separate consumer)."""

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
    """One file being reassembled; ``parts`` is None once dropped from memory (held)."""

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
    chunk_checksums: dict[int, str] = field(default_factory=dict)
    parts: dict[int, bytes] | None = field(default_factory=dict)

    @property
    def held(self) -> bool:
        return self.parts is None

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.parts.values()) if self.parts else 0

    def missing(self) -> list[int]:
        return [i for i in range(self.chunk_count) if i not in self.chunk_checksums]


@dataclass
class _PartitionState:
    files: dict[str, _File] = field(default_factory=dict)
    next_offset: int | None = None
    #: data id -> file checksum of recently completed files: late duplicates are ignored
    completed: OrderedDict[str, str] = field(default_factory=OrderedDict)


class Reassembler:
    """Per-partition reassembly state machine. Not thread-safe: one consumer loop drives it."""

    def __init__(
        self,
        memory_limit_bytes: int = 512 * 1024 * 1024,
        incomplete_timeout_s: float = 300.0,
        completed_memory: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.incomplete_timeout_s = incomplete_timeout_s
        self.completed_memory = completed_memory
        self.clock = clock
        self._partitions: dict[Partition, _PartitionState] = {}
        self._memory = 0
        self._seq = 0

    # -- introspection ------------------------------------------------------------------------
    @property
    def memory_bytes(self) -> int:
        """Payload bytes currently held for incomplete files."""
        return self._memory

    def open_files(self, partition: Partition | None = None) -> list[str]:
        """Data ids of files open or held (in one partition, or all)."""
        parts = [partition] if partition is not None else list(self._partitions)
        names: list[str] = []
        for p in parts:
            state = self._partitions.get(p)
            if state is not None:
                # list() copies in one step: safe to call while the service thread feeds
                names += list(state.files)
        return sorted(names)

    def partitions(self) -> list[Partition]:
        return list(self._partitions)

    def safe_offset(self, partition: Partition) -> int | None:
        """Offset up to which ``partition`` may be committed (None: nothing consumed yet)."""
        state = self._partitions.get(partition)
        if state is None or state.next_offset is None:
            return None
        firsts = [f.first_offset for f in state.files.values()]
        return min([*firsts, state.next_offset])

    def safe_offsets(self) -> dict[Partition, int]:
        out = {}
        for partition in self._partitions:
            offset = self.safe_offset(partition)
            if offset is not None:
                out[partition] = offset
        return out

    # -- feeding ------------------------------------------------------------------------------
    def feed(
        self, value: bytes | None, partition: Partition, offset: int, now: float | None = None
    ) -> list[Verdict]:
        """Take one record of ``partition`` at ``offset``; records must come in offset order."""
        now = self.clock() if now is None else now
        state = self._partitions.setdefault(partition, _PartitionState())
        state.next_offset = max(offset + 1, state.next_offset or 0)
        try:
            chunk = decode_chunk(value)
        except ChunkPoison as exc:
            return [Poison(partition, offset, exc.reason, str(exc), None, value)]
        return self.feed_chunk(chunk, partition, offset, now, value)

    def feed_chunk(
        self,
        chunk: CcdChunk,
        partition: Partition,
        offset: int,
        now: float | None = None,
        value: bytes | None = None,
    ) -> list[Verdict]:
        """Like ``feed`` for an already decoded chunk (``value`` goes to the DLQ if poison)."""
        now = self.clock() if now is None else now
        state = self._partitions.setdefault(partition, _PartitionState())
        state.next_offset = max(offset + 1, state.next_offset or 0)
        try:
            data_id = validate_chunk(chunk)
        except ChunkPoison as exc:
            key = _safe_key(chunk)
            return [Poison(partition, offset, exc.reason, str(exc), key, value)]
        key = data_id.key
        current = state.files.get(key)
        if current is None:
            if state.completed.get(key) == chunk.file_checksum:
                return [Ignored(partition, offset, key, "chunk of a file already completed")]
            current = self._open(state, chunk, data_id, offset, now)
        elif (current.chunk_count, current.total_size, current.file_checksum) != (
            chunk.chunk_count,
            chunk.total_size,
            chunk.file_checksum,
        ):
            return [
                Poison(
                    partition,
                    offset,
                    PoisonReason.FILE_CHANGED,
                    f"{key}: chunk {chunk.chunk_index} says {chunk.chunk_count} chunks, "
                    f"{chunk.total_size} bytes, {chunk.file_checksum}; the file began at offset "
                    f"{current.first_offset} with {current.chunk_count} chunks, "
                    f"{current.total_size} bytes, {current.file_checksum}",
                    key,
                    value,
                )
            ]
        known = current.chunk_checksums.get(chunk.chunk_index)
        if known is not None:
            if known == chunk.chunk_checksum:
                current.last_seen = now
                return [Ignored(partition, offset, key, f"duplicate chunk {chunk.chunk_index}")]
            return [
                Poison(
                    partition,
                    offset,
                    PoisonReason.CHUNK_CONFLICT,
                    f"{key}: chunk {chunk.chunk_index} again with other bytes "
                    f"({chunk.chunk_checksum}, first {known})",
                    key,
                    value,
                )
            ]
        current.chunk_checksums[chunk.chunk_index] = chunk.chunk_checksum
        current.last_offset = offset
        current.last_seen = now
        if current.held:
            if current.missing():
                return []
            del state.files[key]
            self._remember(state, key, current.file_checksum)
            return [Recover(partition, key, current.first_offset, current.last_offset)]
        assert current.parts is not None
        current.parts[chunk.chunk_index] = chunk.payload
        self._memory += len(chunk.payload)
        if len(current.parts) == current.chunk_count:
            return [self._complete(partition, state, current)]
        return self._enforce_memory(partition)

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
        state.files[data_id.key] = new
        return new

    def _complete(self, partition: Partition, state: _PartitionState, f: _File) -> Verdict:
        assert f.parts is not None
        data = b"".join(f.parts[i] for i in range(f.chunk_count))
        self._memory -= f.nbytes
        f.parts = {}
        key = f.data_id.key
        del state.files[key]
        if len(data) != f.total_size:
            return Poison(
                partition,
                f.last_offset,
                PoisonReason.FILE_SIZE,
                f"{key}: chunks add up to {len(data)} bytes, total_size says {f.total_size}",
                key,
                None,
                f.first_offset,
            )
        actual = checksum_str(data)
        if actual != f.file_checksum:
            return Poison(
                partition,
                f.last_offset,
                PoisonReason.FILE_CHECKSUM,
                f"{key}: assembled file has {actual}, chunks say {f.file_checksum}",
                key,
                None,
                f.first_offset,
            )
        self._remember(state, key, f.file_checksum)
        return Completed(
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

    def _remember(self, state: _PartitionState, key: str, file_checksum: str) -> None:
        state.completed[key] = file_checksum
        state.completed.move_to_end(key)
        while len(state.completed) > self.completed_memory:
            state.completed.popitem(last=False)

    # -- memory and time bounds ---------------------------------------------------------------
    def _enforce_memory(self, partition: Partition) -> list[Verdict]:
        """Over the limit: drop the youngest open files' payloads (their offsets stay held)."""
        out: list[Verdict] = []
        while self._memory > self.memory_limit_bytes:
            candidates = [
                (f.started, p, f)
                for p, s in self._partitions.items()
                for f in s.files.values()
                if not f.held
            ]
            if not candidates:
                break
            _, p, victim = max(candidates, key=lambda c: c[0])
            self._memory -= victim.nbytes
            victim.parts = None
            out.append(self._incomplete(p, victim, "memory", final=False))
        return out

    def expire(self, now: float | None = None) -> list[Verdict]:
        """Dead-letter files idle for longer than the timeout; their offsets are released."""
        now = self.clock() if now is None else now
        out: list[Verdict] = []
        for partition, state in self._partitions.items():
            for key, f in list(state.files.items()):
                if now - f.last_seen >= self.incomplete_timeout_s:
                    self._memory -= f.nbytes
                    del state.files[key]
                    out.append(self._incomplete(partition, f, "timeout", final=True))
        return out

    def revoke(self, partitions: Iterable[Partition]) -> dict[Partition, int]:
        """Forget ``partitions`` (rebalance): returns the offsets safe to commit for them.

        Partial files are dropped, not reported: the next owner re-reads them from the
        committed offset, which is at or below their first chunk.
        """
        safe = {}
        for partition in partitions:
            offset = self.safe_offset(partition)
            if offset is not None:
                safe[partition] = offset
            state = self._partitions.pop(partition, None)
            if state is not None:
                self._memory -= sum(f.nbytes for f in state.files.values())
        return safe

    @staticmethod
    def _incomplete(partition: Partition, f: _File, cause: str, final: bool) -> Incomplete:
        missing = f.missing()
        return Incomplete(
            partition,
            f.data_id.key,
            f.chunk_count,
            missing,
            f.chunk_count - len(missing),
            f.first_offset,
            f.last_offset,
            cause,
            final,
            f.file_checksum,
        )


# -- record validation (pure functions) -------------------------------------------------------
def decode_chunk(value: bytes | None) -> CcdChunk:
    """Decode one record; ChunkPoison(undecodable | wrong-schema) if it is not a CcdChunk."""
    from obsingest import avro

    if not value:
        raise ChunkPoison(PoisonReason.UNDECODABLE, "empty record")
    try:
        writer = avro.writer_schema(value)
    except BadMessage as exc:
        raise ChunkPoison(PoisonReason.UNDECODABLE, str(exc)) from None
    if writer.name != CcdChunk.SCHEMA:
        raise ChunkPoison(PoisonReason.WRONG_SCHEMA, f"a {writer.label} record, not a CcdChunk")
    try:
        return CcdChunk.decode(value)
    except (BadMessage, TypeError, ValueError) as exc:
        raise ChunkPoison(PoisonReason.UNDECODABLE, str(exc)) from None


def validate_chunk(chunk: CcdChunk) -> DataId:
    """Record-level checks that need no other chunk: data id, ranges, payload checksum."""
    try:
        data_id = DataId(chunk.instrument, chunk.exposure, chunk.detector)
    except (BadObjectName, ObsIngestError) as exc:
        raise ChunkPoison(PoisonReason.BAD_DATA_ID, str(exc)) from None
    key = data_id.key
    if chunk.day_obs != data_id.day_obs:
        raise ChunkPoison(
            PoisonReason.BAD_DATA_ID, f"{key}: day_obs {chunk.day_obs} does not match exposure"
        )
    if chunk.chunk_count < 1 or chunk.total_size < 0:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK,
            f"{key}: chunk_count {chunk.chunk_count}, total_size {chunk.total_size}",
        )
    if not 0 <= chunk.chunk_index < chunk.chunk_count:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK,
            f"{key}: chunk_index {chunk.chunk_index} outside 0..{chunk.chunk_count - 1}",
        )
    if len(chunk.payload) > chunk.total_size:
        raise ChunkPoison(
            PoisonReason.BAD_CHUNK,
            f"{key}: chunk of {len(chunk.payload)} bytes in a file of {chunk.total_size}",
        )
    actual = checksum_str(chunk.payload)
    if actual != chunk.chunk_checksum:
        raise ChunkPoison(
            PoisonReason.CHUNK_CHECKSUM,
            f"{key}: chunk {chunk.chunk_index} has {actual}, record says {chunk.chunk_checksum}",
        )
    return data_id


def _safe_key(chunk: CcdChunk) -> str | None:
    return f"{chunk.instrument}/{chunk.exposure}/{chunk.detector:03d}"
