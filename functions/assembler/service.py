"""The assembler service: Kafka consumer group -> Reassembler -> object store, DLQ, commits. One
consumer loop acts on each verdict while a thread pool stores completed files; a commit never
passes the first offset of a file still open, held or being stored (functions/assembler/README.md).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, cast

from functions.assembler.dlq import DeadLetters, shown, verdict_fields
from functions.assembler.kafka_clients import committed_lag, consumer_config
from functions.assembler.kafka_clients import group_lag as group_lag  # the tests' lag probe, re-exported
from functions.assembler.naming import assembled_object_name
from functions.assembler.reassembly import (
    Completed,
    Ignored,
    Incomplete,
    Poison,
    PoisonReason,
    Reassembler,
    Recover,
    Verdict,
)
from functions.assembler.recovery import reread
from functions.assembler.settings import AssemblerSettings
from obsingest.errors import PermanentError, RetriableError
from obsingest.logs import get_logger, log_event, logging_context
from obsingest.messages import utcnow
from obsingest.metrics import Metrics, private_metrics
from obsingest.retry import RetriesExhausted, RetryPolicy, Transient, call_with_retries
from obsingest.store.base import ObjectConflict, ObjectStore
from obsingest.store.notifications import object_metadata, parked_copy

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message, TopicPartition

log = get_logger("obsingest.assembler")

TRANSPORT = "kafka"
COMPONENT = "assembler"
#: seconds between refreshes of the lag / open files / memory gauges
GAUGE_SECONDS = 2.0
#: seconds to wait for a partition's high watermark before an idle file's expiry
WATERMARK_TIMEOUT_S = 2.0
#: seconds before a partition whose watermark could not be had is asked again (each ask that
#: fails holds the loop for the timeout; its idle files only wait a little longer)
WATERMARK_RETRY_S = 30.0
#: ``counts()`` name -> the outcome or count it reads
COUNTS = {"existing": "duplicate", "conflicts": "quarantined", "poison": "dead_lettered"} | {
    name: name for name in ("stored", "ignored", "recovered", "records", "bytes")
}
TP = tuple[str, int]


class StoreUnavailable(RetriableError, reason="store-unavailable"):
    """The store kept failing: stop without committing; a restart resumes from the commit."""


def _store_failure(exc: BaseException) -> Transient | None:
    """Any store failure but a permanent one (a conflict included) is worth another put."""
    permanent = isinstance(exc, PermanentError) or not isinstance(exc, Exception)
    return None if permanent else Transient("store")


def _store_retry(attempt: int, error: BaseException) -> None:
    log_event(log, "assembler.store_retry", logging.WARNING, attempt=attempt, error=str(error))


class ConsumerFailed(PermanentError, reason="consumer-fatal"):
    """librdkafka reported a fatal consumer error."""


class AssemblerService:
    """One assembler instance: ``run()`` until stopped, or drive ``poll_once()`` yourself."""

    def __init__(
        self, settings: AssemblerSettings, store: ObjectStore | None = None, metrics: Metrics | None = None
    ) -> None:
        from confluent_kafka import Consumer

        from obsingest.settings import StoreSettings
        from obsingest.store import open_store

        self.settings = settings
        self.metrics = metrics or private_metrics()
        self.metrics.start(COMPONENT)
        self._records = self.metrics.counter(COMPONENT, "records")
        self._bytes = self.metrics.counter(COMPONENT, "bytes")
        self._last_record = time.monotonic()
        self._gauges_at = 0.0
        self.store = store or open_store(StoreSettings(url=settings.store_url))
        self.reassembler = Reassembler(settings.memory_limit_bytes, settings.incomplete_timeout_s)
        self._consumer: Consumer = Consumer(consumer_config(settings))
        self.dead_letters = DeadLetters(settings)
        self._assigned: set[TP] = set()
        #: per partition: (high watermark, when asked) not read to yet; the last such time read to
        self._marks: dict[TP, tuple[int, float]] = {}
        self._settled_at: dict[TP, float] = {}
        #: per partition whose watermark query failed: when to ask again
        self._ask_after: dict[TP, float] = {}
        self._committed: dict[TP, int] = {}
        self._lock = threading.Lock()
        self._subscribed = False
        self._closed = False
        #: a batch failed part-way: committing anything after that could skip files
        self._failed = False
        #: raised by the next poll
        self._store_error: BaseException | None = None
        #: a file stored or dead-lettered: this instance got past what stopped the one before
        self.progressed = False
        #: completed files being written: they hold their partition's commit back
        self._stores = ThreadPoolExecutor(settings.store_concurrency, thread_name_prefix="assembler-store")
        self._pending: dict[Future[None], Completed] = {}
        #: set once this instance owns at least one partition (tests and the demo wait on it)
        self.assigned = threading.Event()

    def subscribe(self) -> None:
        if not self._subscribed:
            self._consumer.subscribe(
                [self.settings.topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._subscribed = True
            log_event(log, "assembler.subscribed", topic=self.settings.topic, group=self.settings.group_id)

    def run(self, stop: threading.Event | None = None, idle_exit_s: float | None = None) -> None:
        """Poll until ``stop`` is set or idle ``idle_exit_s``; always closes, committing what is safe."""
        stop = stop or threading.Event()
        self.subscribe()
        try:
            while not stop.is_set():
                self.poll_once(0.2)
                if idle_exit_s is not None and self.idle_for() >= idle_exit_s:
                    break
        finally:
            self.close()

    def idle_for(self) -> float:
        """Seconds since the last record, or 0 while any file is open or being stored."""
        if self.reassembler.open_files() or self._pending:
            return 0.0
        return time.monotonic() - self._last_record

    def counts(self) -> dict[str, int]:
        """What this instance counted (the ``assembler.closed`` log)."""
        m, c = self.metrics, COMPONENT
        out = {name: m.count(c, outcome) for name, outcome in COUNTS.items()}
        dead = m.value("obsingest_ccds_dead_lettered_total", component=c, reason="incomplete")
        out["incomplete"] = int(dead)
        out["poison"] -= out["incomplete"]
        return out

    def close(self) -> None:
        """Commit safe offsets, leave the group (its revoke commits again), flush the DLQ."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._failed:  # let the writes finish; nothing more is committed
                wait(list(self._pending))
            else:
                self._drain()
                self._commit()
        finally:
            self._stores.shutdown(wait=True)
            self._consumer.close()
            self.dead_letters.close()
            log_event(log, "assembler.closed", **self.counts())

    def poll_once(self, timeout: float = 0.2) -> int:
        """One batch: feed, act on every verdict, then commit what is safe; records handled."""
        from confluent_kafka import KafkaError, KafkaException

        self.subscribe()
        if self._store_error is not None:
            raise self._store_error
        messages = self._consume(timeout)
        handled = 0
        try:
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal():
                        raise ConsumerFailed(f"fatal consumer error: {err.str()}")
                    log_event(log, "assembler.consumer_error", logging.WARNING, error=err.str())
                    continue
                tp = (msg.topic(), msg.partition())
                if tp not in self._assigned:
                    continue  # fetched before a revoke; the new owner reads it
                handled += 1
                value = msg.value()
                self._records.inc()
                self._bytes.inc(len(value or b""))
                self._last_record = time.monotonic()
                for verdict in self.reassembler.feed(value, tp, cast(int, msg.offset())):
                    if isinstance(verdict, Completed):
                        self._store_async(verdict)
                    else:
                        self._act(verdict, msg)
            for verdict in self.reassembler.expire(settled=self._settled):
                self._act(verdict, None)
            self._reap(block=False)
        except BaseException:
            # complete files may be unstored: commit nothing more; a restart re-reads them
            self._failed = True
            raise
        try:
            self._commit()
        except KafkaException as exc:  # e.g. rebalance in progress: the next batch retries
            log_event(log, "assembler.commit_failed", logging.WARNING, error=str(exc))
        self._update_gauges()
        return handled

    def _settled(self, tp: TP) -> float:
        """The latest time (the reassembler's clock) by which every record the broker then held
        in ``tp`` has been fed; asked only when a file there is idle past the timeout. Each
        mark is the high watermark when asked: under steady traffic the partition's end moves
        on, but the records there at the mark are read soon."""
        from confluent_kafka import KafkaException, TopicPartition

        settled, mark = self._settled_at.get(tp, float("-inf")), self._marks.get(tp)
        if mark is not None and self.reassembler.next_offset(tp) >= mark[0]:
            settled, mark = mark[1], None
            self._settled_at[tp] = settled
        if mark is None:
            now = self.reassembler.clock()
            if now < self._ask_after.get(tp, now):
                return settled
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(*tp), timeout=WATERMARK_TIMEOUT_S
                )
            except KafkaException as exc:  # cannot tell: the file waits
                log_event(log, "assembler.watermark_failed", logging.WARNING, partition=tp[1], error=str(exc))
                self._marks.pop(tp, None)
                self._ask_after[tp] = now + WATERMARK_RETRY_S
                return settled
            if self.reassembler.next_offset(tp) >= high:
                settled = self._settled_at[tp] = now
                self._marks.pop(tp, None)
            else:
                self._marks[tp] = (high, now)
        return settled

    def _update_gauges(self) -> None:
        """Lag, open files and held payload every few seconds; never raises."""
        now = time.monotonic()
        if now - self._gauges_at < GAUGE_SECONDS:
            return
        self._gauges_at = now
        try:
            with self._lock:
                assigned, committed = sorted(self._assigned), dict(self._committed)
            self.metrics.assembler_state(
                committed_lag(self._consumer, assigned, committed),
                len(self.reassembler.open_files()),
                self.reassembler.memory_bytes,
                self.settings.memory_limit_bytes,
            )
        except Exception as exc:
            log_event(log, "assembler.metrics_failed", logging.WARNING, error=str(exc))

    def _consume(self, timeout: float) -> list[Message]:
        """Wait up to ``timeout`` for one record, then take what is already fetched
        (``consume(n, t)`` would wait the whole ``t`` for ``n``); short while stores run."""
        if self._pending:
            timeout = min(timeout, 0.01)
        first = self._consumer.consume(1, timeout)
        if not first or self.settings.batch_records == 1:
            return first
        return first + self._consumer.consume(self.settings.batch_records - 1, 0)

    def _store_async(self, done: Completed) -> None:
        """Start writing ``done``, first waiting for a store while the queue is full."""
        while len(self._pending) >= 2 * self.settings.store_concurrency:
            self._reap(block=True)
        self._pending[self._stores.submit(self._store, done)] = done

    def _reap(self, block: bool) -> None:
        """Forget finished stores (waiting for one if ``block``); a failure fails the instance."""
        if block and self._pending:
            wait(list(self._pending), return_when=FIRST_COMPLETED)
        for future in [f for f in self._pending if f.done()]:
            del self._pending[future]
            error = future.exception()
            if error is not None:
                self._failed = True
                self._store_error = error
                raise error

    def _drain(self) -> None:
        if self._pending:
            wait(list(self._pending))
            self._reap(block=False)

    def _commit(self) -> None:
        from confluent_kafka import TopicPartition

        if self._failed:
            return
        held: dict[TP, int] = {}  # the first offset of each partition's oldest file being stored
        for done in self._pending.values():
            held[done.partition] = min(held.get(done.partition, done.first_offset), done.first_offset)
        with self._lock:
            safe = {tp: min(off, held.get(tp, off)) for tp, off in self.reassembler.safe_offsets().items()}
            offsets = [
                TopicPartition(t, p, off)
                for (t, p), off in safe.items()
                if (t, p) in self._assigned and off > self._committed.get((t, p), -1)
            ]
            if not offsets:
                return
            self._consumer.commit(offsets=offsets, asynchronous=False)
            for tp in offsets:
                self._committed[(tp.topic, tp.partition)] = tp.offset

    def _act(self, verdict: Verdict, msg: Message | None) -> None:
        if isinstance(verdict, Completed):
            self._store(verdict)
        elif isinstance(verdict, Poison):
            self.dead_letters.poison(verdict, msg.key() if msg is not None else None)
            self.metrics.ccd(COMPONENT, "dead_lettered", reason=verdict.reason)
            self.progressed = True
        elif isinstance(verdict, Incomplete) and not verdict.final:  # dropped for memory: offsets held
            log_event(log, "assembler.evicted", logging.WARNING, **verdict_fields(verdict))
        elif isinstance(verdict, Incomplete):
            self.dead_letters.incomplete(verdict)
            self.metrics.ccd(COMPONENT, "dead_lettered", reason=PoisonReason.INCOMPLETE)
            self.progressed = True
        elif isinstance(verdict, Recover):  # re-read the dropped file; its verdicts are acted on here
            finished = reread(self.settings, verdict)
            self.metrics.add(COMPONENT, "recovered")
            log_event(log, "assembler.recovered", **verdict_fields(verdict))
            for each in finished:
                self._act(each, None)
        elif isinstance(verdict, Ignored):
            self.metrics.add(COMPONENT, "ignored")
            log_event(log, "assembler.ignored", logging.DEBUG, **verdict_fields(verdict))

    def _store(self, done: Completed) -> None:
        with logging_context(data_id=done.data_id.key):
            name = assembled_object_name(done.data_id, done.data, self.settings.prefix)
            # the producer name is the record's (ours cap it; GCS refuses metadata over 8 KiB)
            producer = shown(done.producer)
            meta = object_metadata(
                done.checksum, done.readout_time, done.compressed_time, TRANSPORT, producer
            )
            try:  # network, 5xx, disk: retry, then stop without committing
                result = call_with_retries(
                    lambda _left: self.store.put(name, done.data, meta),
                    _store_failure,
                    RetryPolicy.doubling(self.settings.store_attempts, self.settings.store_backoff_s),
                    what=name,
                    on_retry=lambda attempt: _store_retry(attempt.number, attempt.error),
                )
                status, outcome = ("stored", "stored") if result.created else ("exists", "duplicate")
            except ObjectConflict as conflict:  # other bytes under that name: parked, as direct uploads do
                q = self.settings.quarantine_prefix
                parked, parked_meta = parked_copy(q, name, done.checksum, meta, conflict.reason)
                log_event(
                    log,
                    "assembler.conflict_parked",
                    logging.ERROR,
                    object=name,
                    parked=parked,
                    error=str(conflict),
                )
                result = self.store.put(parked, done.data, parked_meta)
                status, outcome = "conflict", "quarantined"
            except RetriesExhausted as gave_up:
                _store_retry(gave_up.attempts, gave_up.last)
                raise StoreUnavailable(f"{name}: {gave_up.last}") from gave_up.last
            self.metrics.ccd(COMPONENT, outcome, reason="checksum-conflict" if status == "conflict" else None)
            self.progressed = True
            log_event(
                log,
                f"assembler.{status}",
                object=result.obj.name,
                size=len(done.data),
                chunks=done.chunk_count,
                partition=done.partition[1],
                first_offset=done.first_offset,
                last_offset=done.last_offset,
                latency_s=round((utcnow() - done.readout_time).total_seconds(), 6),
            )

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._assigned.update((tp.topic, tp.partition) for tp in partitions)
            if self._assigned:
                self.assigned.set()
        log_event(log, "assembler.assigned", partitions=[tp.partition for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        from confluent_kafka import KafkaException

        if not self._failed:
            try:
                self._drain()  # a file being stored must not be committed past, nor re-read
            except Exception as exc:  # surfaced by the next poll; nothing more is committed
                log_event(log, "assembler.store_failed", logging.ERROR, error=str(exc))
        if self._failed:
            self._on_lost(consumer, partitions)
            return
        try:
            self._commit()
        except KafkaException as exc:  # the next owner re-reads a little more: harmless
            log_event(log, "assembler.revoke_commit_failed", logging.WARNING, error=str(exc))
        with self._lock:
            revoked, safe = self._forget(partitions)
        log_event(
            log,
            "assembler.revoked",
            partitions=[p for _, p in revoked],
            committed={str(p): o for (_, p), o in safe.items()},
        )

    def _forget(self, partitions: list[TopicPartition]) -> tuple[list[TP], dict[TP, int]]:
        """Drop ``partitions`` from this instance (holding the lock); their offsets safe to commit."""
        revoked = [(tp.topic, tp.partition) for tp in partitions]
        safe = self.reassembler.revoke(revoked)
        for tp in revoked:
            self._assigned.discard(tp)
            for kept in (self._committed, self._marks, self._settled_at, self._ask_after):
                kept.pop(tp, None)
        return revoked, safe

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            revoked, _ = self._forget(partitions)
        log_event(log, "assembler.lost", logging.WARNING, partitions=[p for _, p in revoked])
