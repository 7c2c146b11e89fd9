"""Transport (b) on a real broker: chunks -> assembler -> store (-> register), nothing lost or
doubled through duplicates, corruption, SIGKILL mid-file and a rebalance."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import pytest

from functions.assembler.main import command
from functions.assembler.service import AssemblerService, group_lag
from functions.assembler.settings import AssemblerSettings
from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import ObjectMissing
from obsingest.messages import CcdChunk
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import MetadataKeys
from producers.kafka import KafkaChunkSender, KafkaProducerSettings, encode_chunk, iter_chunks
from tests.integration.fixtures import disk
from tests.integration.fixtures.handles import KafkaService, unique_name

pytestmark = pytest.mark.integration

DAY_OBS = 20261122
READOUT = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
CHUNK = 16 * 1024  # small chunks: ~10 per small CCD, so "mid-file" means something
ROOT = Path(__file__).resolve().parents[2]


@cache
def small_ccd(exposure: int, detector: int) -> bytes:
    """A real compressed CCD (simulator + edge compressor): the register function accepts it."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    spec = CcdSpec("LSSTComCam", exposure, detector, DAY_OBS, READOUT, 15.0, "r", "small")
    return compress_fits(generate_raw_ccd(spec), threads=1)


def ccds(seq: int, count: int) -> dict[DataId, bytes]:
    exposure = DAY_OBS * 100_000 + seq
    return {DataId("LSSTComCam", exposure, d): small_ccd(exposure, d) for d in range(count)}


def records(data_id: DataId, data: bytes) -> list[bytes]:
    return [encode_chunk(c) for c in iter_chunks(data_id, data, READOUT, None, "test-edge", CHUNK)]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


class Producer:
    """Raw records at explicit partitions: deterministic interleaving inside a partition."""

    def __init__(self, kafka: KafkaService, topic: str) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(kafka.producer_config(**{"enable.idempotence": True}))

    def send(self, items: list[tuple[int, bytes, bytes]]) -> None:
        errors: list = []

        def on_delivery(err: object, _m: object) -> None:
            if err:
                errors.append(err)

        for partition, key, value in items:
            self.producer.produce(
                self.topic, value=value, key=key, partition=partition, on_delivery=on_delivery
            )
        assert self.producer.flush(30) == 0
        assert not errors, errors


class Deployment:
    """A chunks topic, its DLQ, a consumer group and a local store, for one test."""

    def __init__(self, kafka: KafkaService, tmp_path: Path, partitions: int) -> None:
        self.kafka = kafka
        self.topic = kafka.new_topic("chunks", partitions=partitions)
        self.dlq = kafka.new_topic("chunks-dlq")
        self.group = unique_name("assembler")
        self.store_dir = tmp_path / "store"
        self.store = LocalDirStore(self.store_dir)

    def settings(self, **extra: Any) -> AssemblerSettings:
        return AssemblerSettings(
            bootstrap_servers=self.kafka.bootstrap_servers,
            topic=self.topic,
            dlq_topic=self.dlq,
            group_id=self.group,
            store_url=f"file://{self.store_dir}",
            session_timeout_ms=6000,
            **extra,
        )

    @contextmanager
    def assembler(self, **extra: object) -> Iterator[AssemblerService]:
        service = AssemblerService(self.settings(**extra), store=self.store)
        stop = threading.Event()
        failures: list[BaseException] = []

        def run() -> None:
            try:
                service.run(stop)
            except BaseException as exc:  # re-raised in the test thread
                failures.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            assert service.assigned.wait(30), "assembler got no partition within 30 s"
            yield service
        finally:
            stop.set()
            thread.join(30)
            assert not thread.is_alive()
            if failures:
                raise failures[0]

    def subprocess_assembler(self, log_path: Path) -> subprocess.Popen:
        argv = command(
            self.kafka.bootstrap_servers, self.topic, self.dlq, self.group, f"file://{self.store_dir}"
        )
        with open(log_path, "ab") as log:
            return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def lag(self) -> int:
        return group_lag(self.kafka.bootstrap_servers, self.group, self.topic)

    def stored(self, data_id: DataId) -> bytes | None:
        try:
            return self.store.read(data_id.object_name())
        except ObjectMissing:
            return None

    def notifications(self) -> int:
        return len(list((self.store_dir / ".notifications").glob("*.json")))

    def dlq_records(self, expected: int, timeout: float = 30) -> list[dict]:
        from confluent_kafka import Consumer

        consumer = Consumer(self.kafka.consumer_config())
        consumer.subscribe([self.dlq])
        out: list[dict] = []
        deadline = time.monotonic() + timeout
        try:
            while len(out) < expected and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                headers = {k: v.decode() for k, v in cast(list[tuple[str, bytes]], msg.headers() or [])}
                out.append({"headers": headers, "value": msg.value(), "key": msg.key()})
        finally:
            consumer.close()
        return out

    def dlq_size(self) -> int:
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer(self.kafka.consumer_config())
        try:
            low, high = probe.get_watermark_offsets(TopicPartition(self.dlq, 0), timeout=10)
            return high - low
        finally:
            probe.close()

    def settle(self, proc: subprocess.Popen, log: Path, expected: dict[DataId, bytes], what: str) -> None:
        """Wait until ``proc`` has stored ``expected`` and committed everything, stop it (exit 0),
        then check the store holds exactly that and the DLQ nothing."""
        try:
            wait_until(lambda: all(self.stored(d) for d in expected), 90, what)
            wait_until(lambda: self.lag() == 0, 60, "the assembler to commit everything")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]
        self.assert_exactly(expected)
        assert self.dlq_size() == 0

    def assert_exactly(self, expected: dict[DataId, bytes]) -> None:
        for data_id, data in expected.items():
            assert self.stored(data_id) == data, data_id
            meta = self.store.stat(data_id.object_name()).metadata
            assert meta[MetadataKeys.TRANSPORT] == "kafka"
            assert meta[MetadataKeys.CHECKSUM] == checksum_str(data)
        # create-once + one finalize notification per new object: exactly once in the store
        assert self.notifications() == len(expected)


def test_interleaved_ccds_from_several_producers_reassemble_bit_exactly(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=3)
    files = ccds(1, 9)
    settings = KafkaProducerSettings(bootstrap_servers=kafka.bootstrap_servers, chunk_size=CHUNK)
    senders = [KafkaChunkSender(settings, dep.topic, producer_name=f"edge-{i}") for i in range(3)]
    items = list(files.items())

    def ship(index: int) -> None:
        for data_id, data in items[index::3]:
            result = senders[index].send(data_id, data, READOUT)
            assert (result.status, result.checksum) == ("acked", checksum_str(data))

    with dep.assembler() as service:
        threads = [threading.Thread(target=ship, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_until(lambda: dep.lag() == 0, 60, "the assembler to commit every chunk")
        assert service.counts()["stored"] == 9
    dep.assert_exactly(files)
    assert dep.dlq_size() == 0


def test_duplicated_chunks_are_ignored(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=1)
    files = ccds(2, 2)
    (a, data_a), (b, data_b) = files.items()
    ra, rb = records(a, data_a), records(b, data_b)
    stream = [ra[0], rb[0], ra[1], ra[1], rb[1], ra[0], *ra[2:], *rb[2:], *ra, rb[-1]]
    Producer(kafka, dep.topic).send([(0, a.key.encode(), v) for v in stream])
    with dep.assembler() as service:
        wait_until(lambda: dep.lag() == 0, 60, "the assembler to commit every chunk")
        assert service.counts()["stored"] == 2
        assert service.counts()["ignored"] == 2 + len(ra) + 1
    dep.assert_exactly(files)
    assert dep.dlq_size() == 0


def test_corrupted_chunk_goes_to_the_dlq_and_the_file_is_reported_incomplete(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=1)
    files = ccds(3, 3)
    (a, data_a), (b, data_b), (c, data_c) = files.items()
    rb = records(b, data_b)
    chunk = CcdChunk.decode(rb[2])
    flipped = bytes([chunk.payload[0] ^ 0xFF]) + chunk.payload[1:]
    corrupt = encode_chunk(dataclasses.replace(chunk, payload=flipped))
    stream = [*records(a, data_a), rb[0], rb[1], corrupt, *rb[3:], b"garbage", *records(c, data_c)]
    Producer(kafka, dep.topic).send([(0, b"k", v) for v in stream])
    corrupt_offset = len(records(a, data_a)) + 2
    with dep.assembler(incomplete_timeout_s=2.0) as service:
        wait_until(lambda: dep.stored(c) is not None, 60, "the CCD behind the poison")
        wait_until(lambda: dep.lag() == 0, 60, "the incomplete file to be dead-lettered")
        counts = service.counts()
        assert (counts["stored"], counts["poison"], counts["incomplete"]) == (2, 2, 1)
    assert dep.stored(a) == data_a and dep.stored(c) == data_c
    assert dep.stored(b) is None
    dlq = dep.dlq_records(3)
    by_reason = {r["headers"]["dlq_reason"]: r for r in dlq}
    assert set(by_reason) == {"chunk-checksum-mismatch", "undecodable", "incomplete"}
    bad = by_reason["chunk-checksum-mismatch"]
    assert bad["value"] == corrupt
    assert bad["headers"]["original_topic"] == dep.topic
    assert bad["headers"]["original_partition"] == "0"
    assert bad["headers"]["original_offset"] == str(corrupt_offset)
    assert "chunk 2" in bad["headers"]["dlq_error"]
    incomplete = by_reason["incomplete"]
    assert incomplete["headers"]["missing_chunks"] == "2"
    report = json.loads(incomplete["value"])
    assert (report["data_id"], report["missing"], report["cause"]) == (b.key, [2], "timeout")


def test_assembler_killed_mid_file_and_restarted_stores_and_registers_every_ccd_once(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=2)
    whole, split, late = ccds(4, 4), ccds(5, 4), ccds(6, 4)
    producer = Producer(kafka, dep.topic)
    first: list[tuple[int, bytes, bytes]] = []
    second: list[tuple[int, bytes, bytes]] = []
    for i, (data_id, data) in enumerate(split.items()):
        recs = records(data_id, data)
        first += [(i % 2, data_id.key.encode(), v) for v in recs[: len(recs) // 2]]
        second += [(i % 2, data_id.key.encode(), v) for v in recs[len(recs) // 2 :]]
    for i, (data_id, data) in enumerate(whole.items()):
        first += [(i % 2, data_id.key.encode(), v) for v in records(data_id, data)]
    for i, (data_id, data) in enumerate(late.items()):
        second += [(i % 2, data_id.key.encode(), v) for v in records(data_id, data)]
    producer.send(first)

    log = tmp_path / "assembler.log"
    proc = dep.subprocess_assembler(log)
    try:
        wait_until(lambda: all(dep.stored(d) for d in whole), 60, "the whole CCDs to be stored")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert all(dep.stored(d) is None for d in split)  # they were mid-file when it died
    assert dep.lag() > 0  # commits stopped at the first half-files

    producer.send(second)
    expected = {**whole, **split, **late}
    dep.settle(dep.subprocess_assembler(log), log, expected, "every CCD after restart")
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    restored = [e for e in events if e["event"] in {"assembler.stored", "assembler.exists"}]
    assert {e["data_id"] for e in restored} == {d.key for d in expected}

    _register_all(dep, tmp_path, expected)


def _register_all(dep: Deployment, tmp_path: Path, expected: dict[DataId, bytes]) -> None:
    """The local store's finalize notifications through the real register function."""
    from functions.register.service import RegisterService
    from obsingest.bus.memory import InMemoryBus
    from obsingest.registry import Registry
    from obsingest.settings import RegistrySettings
    from obsingest.store.dispatch import OutboxDispatcher
    from obsingest.store.notifications import from_storage_cloudevent

    registry = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'registry.sqlite3'}"))
    bus = InMemoryBus()
    service = RegisterService(dep.store, registry, bus)
    outcomes = []
    dispatcher = OutboxDispatcher(
        dep.store.outbox(),
        lambda event: outcomes.append(service.handle(from_storage_cloudevent(event, event["data"]))),
    )
    try:
        while dispatcher.drain_once():
            pass
        assert dispatcher.dead_lettered == 0
        assert sorted(o.status for o in outcomes) == ["registered"] * len(expected)
        assert registry.count_datasets() == len(expected)
        assert registry.quarantined() == []
        assert len(bus.topics["ccd-arrivals"]) == len(expected)
    finally:
        registry.close()


def test_a_rebalance_to_a_second_assembler_loses_nothing_and_doubles_nothing(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=4)
    split, late = ccds(7, 8), ccds(8, 4)
    producer = Producer(kafka, dep.topic)
    first, second = [], []
    for i, (data_id, data) in enumerate(split.items()):
        recs = records(data_id, data)
        first += [(i % 4, data_id.key.encode(), v) for v in recs[: len(recs) // 2]]
        second += [(i % 4, data_id.key.encode(), v) for v in recs[len(recs) // 2 :]]
    for i, (data_id, data) in enumerate(late.items()):
        second += [(i % 4, data_id.key.encode(), v) for v in records(data_id, data)]
    producer.send(first)
    with dep.assembler() as one:
        wait_until(lambda: len(one.reassembler.open_files()) == 8, 60, "8 half files in memory")
        with dep.assembler() as two:
            wait_until(lambda: len(one.reassembler.partitions()) < 4, 60, "a partition to move")
            assert two.assigned.is_set()
            producer.send(second)
            expected = {**split, **late}
            wait_until(lambda: all(dep.stored(d) for d in expected), 60, "every CCD")
            wait_until(lambda: dep.lag() == 0, 60, "both assemblers to commit everything")
            assert one.counts()["stored"] > 0 and two.counts()["stored"] > 0
            assert one.counts()["stored"] + two.counts()["stored"] == len(expected)
            assert one.counts()["existing"] + two.counts()["existing"] == 0
    dep.assert_exactly(expected)
    assert dep.dlq_size() == 0


def test_send_result_names_the_object_the_assembler_stores(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=1)
    [(data_id, data)] = ccds(9, 1).items()
    url = f"kafka://{kafka.bootstrap_servers}/{dep.topic}?chunk_size={CHUNK}"
    from producers.sender import open_sender

    result = open_sender(url, "raw/", "quarantine/", producer="edge-x").send(data_id, data, READOUT)
    with dep.assembler():
        wait_until(lambda: dep.stored(data_id) is not None, 60, "the CCD")
    assert dep.store.read(result.object_name) == data
    assert result.chunks == -(-len(data) // CHUNK)
    assert result.object_name == data_id.object_name()


def test_files_dropped_for_memory_are_recovered_from_their_offsets(kafka, tmp_path):
    dep = Deployment(kafka, tmp_path, partitions=1)
    files = {DataId("LSSTComCam", DAY_OBS * 100_000 + 10, d): os.urandom(600_000) for d in range(4)}
    streams = [records(d, data) for d, data in files.items()]
    interleaved = [s[i] for i in range(max(map(len, streams))) for s in streams if i < len(s)]
    # keyed by partition, not data id: the assembler must not depend on the key convention
    Producer(kafka, dep.topic).send([(0, b"partition-0", v) for v in interleaved])
    with dep.assembler(memory_limit_bytes=1024 * 1024) as service:  # < 2 of the 4 files
        wait_until(lambda: dep.lag() == 0, 60, "every file, recovered or not, to be committed")
        assert service.counts()["recovered"] > 0
        assert service.counts()["stored"] == len(files)
        assert service.reassembler.memory_bytes == 0
    dep.assert_exactly(files)
    assert dep.dlq_size() == 0


def test_a_poison_record_too_large_for_a_copy_in_the_dlq_is_reported_and_passed(kafka, tmp_path):
    # a record the chunks topic took at its limit: its copy with the DLQ headers did not fit the
    # DLQ (the broker refused it), the instance died, and again on it after every restart
    dep = Deployment(kafka, tmp_path, partitions=1)
    limit = AssemblerSettings().max_record_bytes
    files = ccds(7, 1)
    ((data_id, data),) = files.items()
    Producer(kafka, dep.topic).send(
        [(0, b"k", b"\x00" * (limit - 100)), *[(0, b"k", v) for v in records(data_id, data)]]
    )
    with dep.assembler() as service:
        wait_until(lambda: dep.lag() == 0 or service._failed, 60, "the CCD behind the poison")
        assert service.counts()["stored"] == 1
    dep.assert_exactly(files)
    (dead,) = dep.dlq_records(1)
    assert dead["headers"]["dlq_reason"] == "undecodable"
    assert dead["headers"]["original_offset"] == "0"
    report = json.loads(dead["value"])
    assert report["dlq_value"].startswith(f"omitted: {limit - 100} bytes")


def test_a_store_outage_longer_than_the_retries_is_waited_out_by_the_process(kafka, tmp_path):
    # the store failing past an instance's retries stopped the process (exit 1): nothing was
    # lost (no commit past the file) but nothing came in either until someone restarted it
    with disk.tmpfs(tmp_path / "full", 16) as mount:
        _wait_out_a_full_store(Deployment(kafka, tmp_path, partitions=1), mount)


def _wait_out_a_full_store(dep: Deployment, mount: Path) -> None:
    dep.store_dir, dep.store = mount, LocalDirStore(mount)
    ballast = disk.fill(mount, leave=0)
    files = ccds(8, 4)
    Producer(dep.kafka, dep.topic).send(
        [(0, d.key.encode(), v) for d, data in files.items() for v in records(d, data)]
    )
    log = mount.parent / "assembler.log"
    proc = dep.subprocess_assembler(log)
    try:
        failed = "assembler.store_retry"
        wait_until(lambda: failed in log.read_text() or proc.poll() is not None, 60, "a store failure")
        time.sleep(5)  # past the instance's retries (0.2 + 0.4 + 0.8 + 1.6 s)
        assert proc.poll() is None, log.read_text()[-3000:]
        assert "assembler.restarting" in log.read_text()
        assert all(dep.stored(d) is None for d in files)
        ballast.unlink()
    except BaseException:
        proc.kill()
        raise
    dep.settle(proc, log, files, "every CCD once the disk has room")
