"""Dead letters of the assembler: every report must fit the DLQ's record limit, whatever the
record that caused it claims."""

from typing import Any, cast

import pytest

from functions.assembler.dlq import DeadLetters
from functions.assembler.reassembly import Incomplete, Poison, PoisonReason, Reassembler
from functions.assembler.settings import AssemblerSettings
from tests.unit.functions.assembler.reassembly_helpers import Feeder, ccd, only, reencode

pytestmark = pytest.mark.unit


class FakeProducer:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def produce(self, topic: str, **record: Any) -> None:
        self.records.append(record)

    def flush(self, timeout: float) -> int:
        return 0


def _record_bytes(record: dict[str, Any]) -> int:
    headers = sum(len(k) + len(v) for k, v in record["headers"])
    return len(record["value"]) + len(record["key"] or b"") + headers


def test_an_incomplete_file_claiming_millions_of_chunks_gets_a_report_that_fits_the_dlq():
    # one self-consistent chunk claiming 3,000,000 chunks: listing every missing index made a
    # report of ~40 MB that the producer refused (the instance died, and again after each restart)
    r = Reassembler(incomplete_timeout_s=300.0)
    feed = Feeder(r)
    _, _, records = ccd(3)
    feed(reencode(records[0], chunk_count=3_000_000, total_size=3_000_000 * 4096))
    inc = only(r.expire(now=300.0), Incomplete)
    assert inc.received == 1 and inc.chunk_count == 3_000_000
    settings = AssemblerSettings(bootstrap_servers="127.0.0.1:1")
    dead = DeadLetters(settings)
    dead._producer = producer = FakeProducer()  # type: ignore[assignment]
    dead.incomplete(inc)
    (record,) = producer.records
    assert _record_bytes(record) < settings.max_record_bytes
    assert record["headers"][0] == ("dlq_reason", b"incomplete")


def test_a_record_naming_a_megabytes_long_instrument_is_dead_lettered_within_the_dlqs_limit():
    # its data id went whole into the DLQ key, the dlq_error header and the log: three copies of
    # 6 MiB, a DLQ record the producer refused, and the instance died on it after every restart
    r = Reassembler()
    feed = Feeder(r)
    _, _, records = ccd(1)
    bad = reencode(records[0], instrument="X" * (6 << 20))
    poison = only(feed(bad), Poison)
    assert poison.reason == PoisonReason.BAD_DATA_ID and poison.value == bad
    settings = AssemblerSettings(bootstrap_servers="127.0.0.1:1")
    dead = DeadLetters(settings)
    dead._producer = producer = FakeProducer()  # type: ignore[assignment]
    dead.poison(poison, b"k")
    (record,) = producer.records
    assert record["value"] == bad  # the original record, as it was
    assert _record_bytes(record) - len(bad) < 4096  # what the DLQ adds stays small


@pytest.mark.parametrize("when", ["between dead letters", "in flight"])
def test_a_fatal_error_of_the_dlq_producer_is_a_dlq_failure_a_new_instance_retries(when):
    """librdkafka's fatal error (in-process mock cluster) ends the DLQ producer: produce() raises
    _FATAL after it, the flush that serves it raises it. Raw KafkaExceptions, not DeadLetterFailed:
    the assembler process exited (it starts a new instance, with a new producer, only after a
    retriable error) and nothing restarted it."""
    from functions.assembler.dlq import DeadLetterFailed
    from tests.fixtures.kafka_fatal import MOCK_CLUSTER, inject_fatal_error

    dead = DeadLetters(AssemblerSettings(extra=MOCK_CLUSTER))
    dead.send(b"k", b"first", {"dlq_reason": "test"})
    real = dead._producer

    class FatalInFlight:
        def produce(self, *args: Any, **kwargs: Any) -> None:
            real.produce(*args, **kwargs)
            inject_fatal_error(real)

        def flush(self, timeout: float) -> int:
            return int(real.flush(timeout))

    if when == "in flight":
        dead._producer = cast(Any, FatalInFlight())
    else:
        inject_fatal_error(real)
    with pytest.raises(DeadLetterFailed):
        dead.send(b"k", b"second", {"dlq_reason": "test"})
