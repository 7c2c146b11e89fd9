"""Streaming mode: live per-exposure summaries from Pub/Sub (or Kafka) arrival events, to
``exposure-summaries`` (optionally a file and BigQuery), breaches also to ``budget-alerts``. Kafka
input needs Java and Beam's expansion service: wired but not tested here (beam_jobs/README.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

import apache_beam as beam
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineResult

from beam_jobs.runner import pipeline_options
from beam_jobs.sinks import BIGQUERY_SCHEMA, AppendSummariesToLocalFile
from beam_jobs.transforms import (
    ALERTS,
    BAD,
    LATE,
    SUMMARIES,
    DecodeMessages,
    ExposureSummaries,
    SummaryConfig,
)
from obsingest import defaults
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureManifest

log = get_logger("beam_jobs.streaming")


@dataclass
class StreamingSettings:
    """Where the streaming job reads and writes (Pub/Sub names are full paths:
    ``projects/P/subscriptions/S``, ``projects/P/topics/T``), and its timing policy."""

    arrivals_subscription: str | None = None
    manifests_subscription: str | None = None
    summaries_topic: str | None = None
    alerts_topic: str | None = None
    #: undecodable input messages go here, body unchanged, and elements for an expired exposure
    #: (transforms.LATE), reason in attribute ``dlq_reason``
    dead_letter_topic: str | None = None
    #: local JSONL (or .avro) file of summaries / alerts (single-worker runners only)
    output: str | None = None
    alerts_output: str | None = None
    #: Kafka source instead of (or as well as) Pub/Sub; needs the Java expansion service
    kafka_bootstrap: str | None = None
    kafka_arrivals_topic: str = defaults.ARRIVALS_TOPIC
    kafka_manifests_topic: str = defaults.EXPOSURES_TOPIC
    #: BigQuery table ``project:dataset.table`` (GCP only; schema in beam_jobs.sinks)
    bigquery_table: str | None = None
    budget: float = defaults.BUDGET_SECONDS
    grace: float = 5.0
    allowed_lateness: float = 600.0
    #: stop (cancel) after this many seconds; None runs until the runner stops it
    run_for: float | None = None
    pipeline_args: list[str] = field(default_factory=list)

    @property
    def config(self) -> SummaryConfig:
        return SummaryConfig(self.budget, self.grace, self.allowed_lateness)


def _decode(
    pcoll: beam.PCollection, label: str, contract: str, settings: StreamingSettings
) -> beam.PCollection:
    decoded = pcoll | f"Decode{label}" >> beam.ParDo(DecodeMessages(contract)).with_outputs(BAD, main="ok")
    _dead_letter(decoded[BAD], label, settings)
    return decoded.ok


def _dead_letter(bad: beam.PCollection, label: str, settings: StreamingSettings) -> None:
    """(body, reason) pairs -> the dead-letter topic, reason in attribute ``dlq_reason``."""
    if settings.dead_letter_topic:
        _ = (
            bad
            | f"DeadLetter{label}"
            >> beam.Map(lambda bad: PubsubMessage(bad[0], {"dlq_reason": bad[1][:1000]}))
            | f"PublishDeadLetter{label}"
            >> beam.io.WriteToPubSub(settings.dead_letter_topic, with_attributes=True)
        )


def _source(p: beam.Pipeline, settings: StreamingSettings, what: str) -> beam.PCollection:
    contract, subscription, topic = {
        "Arrivals": (ArrivalEvent.SCHEMA, settings.arrivals_subscription, settings.kafka_arrivals_topic),
        "Manifests": (
            ExposureManifest.SCHEMA,
            settings.manifests_subscription,
            settings.kafka_manifests_topic,
        ),
    }[what]
    parts = []
    if subscription:
        raw = p | f"ReadPubSub{what}" >> beam.io.ReadFromPubSub(subscription=subscription)
        parts.append(_decode(raw, f"PubSub{what}", contract, settings))
    if settings.kafka_bootstrap:
        from apache_beam.io.kafka import ReadFromKafka

        raw = (
            p
            | f"ReadKafka{what}"
            >> ReadFromKafka(consumer_config={"bootstrap.servers": settings.kafka_bootstrap}, topics=[topic])
            | f"KafkaValue{what}" >> beam.Map(lambda kv: kv[1])
        )
        parts.append(_decode(raw, f"Kafka{what}", contract, settings))
    if not parts:
        raise ValueError(f"no source for {what.lower()}: give a subscription or kafka_bootstrap")
    return parts[0] if len(parts) == 1 else tuple(parts) | f"Flatten{what}" >> beam.Flatten()


def build_streaming(p: beam.Pipeline, settings: StreamingSettings) -> None:
    """Add the streaming job to ``p``."""
    inputs = {"arrivals": _source(p, settings, "Arrivals"), "manifests": _source(p, settings, "Manifests")}
    result = inputs | "ExposureSummaries" >> ExposureSummaries(settings.config, streaming=True)
    _dead_letter(result[LATE], "Late", settings)
    for tag, topic, path in (
        (SUMMARIES, settings.summaries_topic, settings.output),
        (ALERTS, settings.alerts_topic, settings.alerts_output),
    ):
        name = tag.capitalize()
        if topic:
            _ = (
                result[tag]
                | f"Encode{name}" >> beam.Map(lambda s: s.encode())
                | f"Publish{name}" >> beam.io.WriteToPubSub(topic)
            )
        if path:
            _ = result[tag] | f"Append{name}" >> beam.ParDo(AppendSummariesToLocalFile(path))
    if settings.bigquery_table:
        _ = (
            result[SUMMARIES]
            | "ToBigQueryRow" >> beam.Map(lambda s: s.to_json_dict())  # ISO times suit TIMESTAMP
            | "WriteBigQuery"
            >> beam.io.WriteToBigQuery(
                settings.bigquery_table,
                schema=BIGQUERY_SCHEMA,
                create_disposition=beam.io.BigQueryDisposition.CREATE_IF_NEEDED,
                write_disposition=beam.io.BigQueryDisposition.WRITE_APPEND,
            )
        )


def run_streaming(settings: StreamingSettings) -> PipelineResult:
    """Start the streaming job; block until it ends, or cancel it after ``settings.run_for``."""
    pubsub = (
        settings.arrivals_subscription,
        settings.manifests_subscription,
        settings.summaries_topic,
        settings.alerts_topic,
        settings.dead_letter_topic,
    )
    options = pipeline_options(settings.pipeline_args, streaming=True, pubsub=any(pubsub))
    standard = options.view_as(StandardOptions)
    p = beam.Pipeline(options=options)
    build_streaming(p, settings)
    log_event(
        log,
        "streaming_start",
        logging.INFO,
        runner=str(standard.runner),
        arrivals=settings.arrivals_subscription,
        manifests=settings.manifests_subscription,
        summaries_topic=settings.summaries_topic,
        **asdict(settings.config),  # budget, grace, allowed_lateness
    )
    result = p.run()
    if settings.run_for is None:
        result.wait_until_finish()
    else:
        time.sleep(settings.run_for)
        result.cancel()
    log_event(log, "streaming_stop", logging.INFO, state=str(result.state))
    return result
