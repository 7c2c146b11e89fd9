"""The assembler's dead letters, each acknowledged before any offset past it is committed: poison
records as they are (reason in headers), a file-level verdict as a JSON report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any

from functions.assembler.kafka_clients import dlq_producer_config
from functions.assembler.reassembly import Ignored, Incomplete, Poison, PoisonReason, Recover
from functions.assembler.settings import AssemblerSettings
from obsingest.errors import RetriableError
from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.assembler")
#: characters of a DLQ key or header value (and of a logged data id or error): a record's strings
#: may be megabytes long, and its copy must still fit the DLQ topic beside the record itself
SHOWN_CHARS = 1024
#: what a DLQ copy adds to a record at most (clipped key and headers, the record's framing)
COPY_RESERVE = 4096


def shown(text: str) -> str:
    """``text`` clipped to ``SHOWN_CHARS``, saying how long it was."""
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"


class DeadLetterFailed(RetriableError, reason="dlq-failed"):
    """A DLQ record was not acknowledged: offsets past it must not be committed."""


def _headers(reason: str, error: str, partition: tuple[str, int], offset: int) -> dict[str, str]:
    topic, number = partition
    return {
        "dlq_reason": reason,
        "dlq_error": shown(error),
        "original_topic": topic,
        "original_partition": str(number),
        "original_offset": str(offset),
    }


def verdict_fields(verdict: Incomplete | Recover | Ignored) -> dict[str, Any]:
    """A verdict's facts for its log line (and an incomplete file's report), the partition by number."""
    fields = asdict(verdict) | {"partition": verdict.partition[1]}
    fields.pop("file_checksum", None)
    return fields


class DeadLetters:
    """An idempotent producer on the DLQ topic; every send waits for its acknowledgement."""

    def __init__(self, settings: AssemblerSettings) -> None:
        from confluent_kafka import Producer

        self.topic = settings.dlq_topic
        #: the largest record copied as it is (the DLQ topic takes what the chunks topic takes)
        self.largest_copy = settings.max_record_bytes - COPY_RESERVE
        self._producer = Producer(dlq_producer_config(settings))

    def poison(self, p: Poison, fallback_key: bytes | None) -> None:
        headers = _headers(p.reason, p.error, p.partition, p.offset)
        if p.first_offset is not None:
            headers["first_offset"] = str(p.first_offset)
        data_id = shown(p.data_id) if p.data_id else None
        value = p.value
        if value is not None and len(value) > self.largest_copy:  # no room for the headers
            headers["dlq_value"] = f"omitted: {len(value)} bytes; replay it from its original offset"
            value = None
        if value is None:  # a file-level verdict, or a record too large: a report instead
            value = json.dumps({"data_id": data_id, **headers}).encode()
        key = data_id.encode() if data_id else fallback_key
        self.send(key, value, headers)
        log_event(
            log,
            "assembler.poison",
            logging.ERROR,
            data_id=data_id,
            reason=p.reason,
            error=headers["dlq_error"],
            partition=p.partition[1],
            offset=p.offset,
        )

    def incomplete(self, inc: Incomplete) -> None:
        fields = verdict_fields(inc)
        report = {"report": "incomplete", **fields, "file_checksum": shown(inc.file_checksum)}
        error = (
            f"{inc.data_id}: {inc.received}/{inc.chunk_count} chunks after {inc.cause}; missing {inc.missing}"
        )
        headers = _headers(PoisonReason.INCOMPLETE, error, inc.partition, inc.first_offset) | {
            "first_offset": str(inc.first_offset),
            "last_offset": str(inc.last_offset),
            "missing_chunks": ",".join(map(str, inc.missing)),
            "file_checksum": shown(inc.file_checksum),
        }
        self.send(inc.data_id.encode(), json.dumps(report).encode(), headers)
        log_event(log, "assembler.incomplete", logging.ERROR, **fields)

    def send(self, key: bytes | None, value: bytes, headers: dict[str, str]) -> None:
        from confluent_kafka import KafkaException

        errors: list[Any] = []
        try:
            self._producer.produce(
                self.topic,
                value=value,
                key=key,
                headers=[(k, v.encode()) for k, v in headers.items()],
                on_delivery=lambda err, _m: errors.append(err) if err else None,
            )
            unflushed = self._producer.flush(30)
        except (KafkaException, SystemError) as exc:  # librdkafka's fatal error among them (a
            # SystemError if a delivery report was served after it): a new instance has a new producer
            raise DeadLetterFailed(f"DLQ {self.topic}: {exc.__cause__ or exc}") from exc
        if unflushed or errors:
            raise DeadLetterFailed(f"DLQ {self.topic}: {errors or 'not flushed'}")

    def close(self) -> None:
        self._producer.flush(10)
