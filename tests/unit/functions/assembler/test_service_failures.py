"""The service's commit rule when something fails part-way: nothing may be committed past a
file that was completed but not stored, not on the failing batch, not on close, not on revoke."""

import dataclasses
import threading
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from functions.assembler.service import AssemblerService, StoreUnavailable
from functions.assembler.settings import AssemblerSettings
from obsingest.dataid import DataId
from obsingest.messages import CcdChunk
from obsingest.store.gcs import StoreRequestRefused
from obsingest.store.local import LocalDirStore
from producers.kafka import encode_chunk, iter_chunks

pytestmark = pytest.mark.unit

TOPIC = "ccd-chunks"


class Msg:
    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = partition, offset, value

    def error(self):
        return None

    def topic(self):
        return TOPIC

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def value(self):
        return self._v

    def key(self):
        return b"k"


class FakeConsumer:
    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages
        self.commits: list[Any] = []

    def subscribe(self, *args, **kwargs) -> None:
        pass

    def consume(self, count: int, timeout: float) -> list[Msg]:
        out, self.messages = self.messages[:count], self.messages[count:]
        return out

    def commit(self, offsets, asynchronous: bool) -> None:
        self.commits += [(o.partition, o.offset) for o in offsets]

    def close(self) -> None:
        pass


class BrokenStore(LocalDirStore):
    def put(self, name, data, metadata=None):
        raise OSError("destination disk full")


def _service(tmp_path, store, producer: str | None = None) -> tuple[AssemblerService, FakeConsumer]:
    settings = AssemblerSettings(
        bootstrap_servers="127.0.0.1:1",
        store_attempts=2,
        store_backoff_s=0.001,
        store_url=f"file://{tmp_path}",
    )
    service = AssemblerService(settings, store=store)
    service._consumer.close()
    records = [
        encode_chunk(c)
        for c in iter_chunks(
            DataId("LSSTComCam", 2026112200001, 0), b"x" * 10000, datetime.now(UTC), None, "t", 4096
        )
    ]
    if producer is not None:  # what no producer of ours writes (its names are capped)
        records = [dataclasses.replace(CcdChunk.decode(r), producer=producer).encode() for r in records]
    consumer = FakeConsumer([Msg(0, i, v) for i, v in enumerate(records)])
    service._consumer = cast(Any, consumer)
    service._assigned.add((TOPIC, 0))
    service._subscribed = True
    return service, consumer


def test_a_failed_store_commits_nothing_even_on_close(tmp_path):
    service, consumer = _service(tmp_path, BrokenStore(tmp_path / "store"))
    with pytest.raises(StoreUnavailable, match="disk full"):
        service.run()
    # the file starts at offset 0: a commit may say "start at 0", never anything past it
    assert all(offset == 0 for _, offset in consumer.commits)


def test_a_stored_file_is_committed_past(tmp_path):
    store = LocalDirStore(tmp_path / "store")
    service, consumer = _service(tmp_path, store)
    service.poll_once(0)
    service.close()
    assert consumer.commits and max(o for _, o in consumer.commits) == 3
    assert store.read(DataId("LSSTComCam", 2026112200001, 0).object_name()) == b"x" * 10000


class SlowStore(LocalDirStore):
    """A store whose writes wait until the test lets them finish."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.release = threading.Event()

    def put(self, name, data, metadata=None):
        assert self.release.wait(10), "the test never released the write"
        return super().put(name, data, metadata)


def test_consuming_goes_on_while_a_file_is_stored_but_commits_wait_for_it(tmp_path):
    store = SlowStore(tmp_path / "store")
    service, consumer = _service(tmp_path, store)
    service.poll_once(0)  # the file completes; its write starts and blocks
    assert service.idle_for() == 0.0  # a write in flight is work, not idleness
    assert all(offset == 0 for _, offset in consumer.commits)
    store.release.set()
    deadline = time.monotonic() + 10
    while not any(offset == 3 for _, offset in consumer.commits) and time.monotonic() < deadline:
        service.poll_once(0.01)
    assert max(o for _, o in consumer.commits) == 3
    service.close()
    assert store.read(DataId("LSSTComCam", 2026112200001, 0).object_name()) == b"x" * 10000


class MetadataLimitedStore(LocalDirStore):
    """Refuses custom metadata over 8 KiB in all, as GCS does (HTTP 400)."""

    def put(self, name, data, metadata=None):
        if sum(len(k) + len(v) for k, v in (metadata or {}).items()) > 8192:
            raise StoreRequestRefused(f"{name}: refused with HTTP 400 (metadata too large)")
        return super().put(name, data, metadata)


def test_a_megabytes_long_producer_name_does_not_make_a_file_unstorable(tmp_path):
    # the producer name went whole into the object's metadata: the store refused the file
    # (permanent), the instance died, and again on that file after every restart
    store = MetadataLimitedStore(tmp_path / "store")
    service, consumer = _service(tmp_path, store, producer="p" * (1 << 20))
    service.poll_once(0)
    service.close()
    name = DataId("LSSTComCam", 2026112200001, 0).object_name()
    assert store.read(name) == b"x" * 10000
    assert max(o for _, o in consumer.commits) == 3


class PausedConsumer(FakeConsumer):
    """``None`` in the records: one consume answers nothing although what follows is already in
    the topic (a fetch in flight after the process was paused). The high watermark counts all."""

    def __init__(self, messages: list[Msg | None]) -> None:
        super().__init__([m for m in messages if m is not None])
        self.stream = messages
        self.high = len(self.messages)

    def consume(self, count: int, timeout: float) -> list[Msg]:
        if self.stream and self.stream[0] is None:
            self.stream.pop(0)
            return []
        out: list[Msg] = []
        while self.stream and self.stream[0] is not None and len(out) < count:
            out.append(cast(Msg, self.stream.pop(0)))
        return out

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        return 0, self.high


class RecordingProducer:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def produce(self, topic, **record) -> None:
        self.records.append(record)

    def flush(self, timeout) -> int:
        return 0


def test_a_pause_longer_than_the_timeout_does_not_expire_a_file_whose_chunks_are_unread(tmp_path):
    # paused (SIGSTOP, a stalled store, a partition outage) past the incomplete timeout between
    # two chunks of a CCD the producer had sent whole: the file was dead-lettered as incomplete
    # and committed past before its last chunks were read; they opened an orphan: the CCD lost
    store = LocalDirStore(tmp_path / "store")
    service, consumer = _service(tmp_path, store)
    first, *rest = consumer.messages
    paused = PausedConsumer([first, None, None, *rest])
    service._consumer = cast(Any, paused)
    service.dead_letters._producer = dlq = cast(Any, RecordingProducer())
    now = [0.0]
    service.reassembler.clock = lambda: now[0]
    service.poll_once(0)  # chunk 0: the file opens
    now[0] += 2 * service.settings.incomplete_timeout_s  # the pause
    service.poll_once(0)  # nothing delivered yet: the rest is still in flight
    service.poll_once(0)  # the other chunks
    service.close()
    assert dlq.records == []
    assert store.read(DataId("LSSTComCam", 2026112200001, 0).object_name()) == b"x" * 10000
    assert max(o for _, o in paused.commits) == 3


class SteadyConsumer(FakeConsumer):
    """One record a consume, and a producer always one record ahead: the partition's end is never
    reached, as under a night's steady traffic."""

    def __init__(self, messages: list[Msg]) -> None:
        super().__init__(messages)
        self.total = len(messages)

    def consume(self, count: int, timeout: float) -> list[Msg]:
        return super().consume(1, timeout)

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        return 0, self.fed + 1

    @property
    def fed(self) -> int:
        return self.total - len(self.messages)


def test_under_steady_traffic_a_dead_partial_still_expires_once_what_was_there_is_read(tmp_path):
    # a producer died after a CCD's first chunk; other CCDs keep coming, so the partition is never
    # read to its end: expiry waited for that end, the commit stayed behind the dead partial for
    # good (a restart re-read everything since) and its payload stayed held
    store = LocalDirStore(tmp_path / "store")
    service, _ = _service(tmp_path, store)
    when = datetime.now(UTC)
    dead = encode_chunk(
        next(iter_chunks(DataId("LSSTComCam", 2026112200001, 0), b"x" * 10000, when, None, "t", 4096))
    )
    others = [
        encode_chunk(c)
        for d in range(1, 6)
        for c in iter_chunks(DataId("LSSTComCam", 2026112200002, d), b"y" * 100, when, None, "t", 4096)
    ]
    consumer = SteadyConsumer([Msg(0, i, v) for i, v in enumerate([dead, *others])])
    service._consumer = cast(Any, consumer)
    service.dead_letters._producer = dlq = cast(Any, RecordingProducer())
    now = [0.0]
    service.reassembler.clock = lambda: now[0]
    service.poll_once(0)  # the dead partial's only chunk
    for _ in others:
        now[0] += service.settings.incomplete_timeout_s
        service.poll_once(0)
    service.close()
    assert [dict(r["headers"])["dlq_reason"] for r in dlq.records] == [b"incomplete"]
    assert max(o for _, o in consumer.commits) == len(others) + 1


class HiccupConsumer(FakeConsumer):
    """A broker hiccup: the watermark query fails (after its timeout, 2 s on a real consumer)
    until the test ends it."""

    def __init__(self, messages: list[Msg]) -> None:
        super().__init__(messages)
        self.asked = 0
        self.hiccup = True

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        from confluent_kafka import KafkaError, KafkaException

        if cached:  # the lag gauge's: no round trip
            return 0, 1
        self.asked += 1
        if self.hiccup:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return 0, 1


def test_a_failing_watermark_query_is_not_asked_again_on_every_poll(tmp_path):
    # while the high watermark could not be had, every poll asked again and waited its 2 s
    # timeout (per partition with an idle file): the loop took a batch per 2 s, the Kafka path
    # fell behind the night's rate for as long as the hiccup lasted
    from functions.assembler.service import WATERMARK_RETRY_S

    service, _ = _service(tmp_path, LocalDirStore(tmp_path / "store"))
    when = datetime.now(UTC)
    dead = next(iter_chunks(DataId("LSSTComCam", 2026112200001, 0), b"x" * 10000, when, None, "t", 4096))
    consumer = HiccupConsumer([Msg(0, 0, encode_chunk(dead))])
    service._consumer = cast(Any, consumer)
    service.dead_letters._producer = dlq = cast(Any, RecordingProducer())
    now = [0.0]
    service.reassembler.clock = lambda: now[0]
    service.poll_once(0)  # a partial whose producer died
    now[0] += service.settings.incomplete_timeout_s
    for _ in range(10):
        service.poll_once(0)
    assert consumer.asked == 1
    consumer.hiccup = False
    now[0] += WATERMARK_RETRY_S  # asked again: the partial expires
    service.poll_once(0)
    service.close()
    assert consumer.asked == 2
    assert [dict(r["headers"])["dlq_reason"] for r in dlq.records] == [b"incomplete"]
