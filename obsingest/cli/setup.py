"""``obsingest setup``: create, idempotently, everything the direct-upload path needs.

Pub/Sub topics (objects, its dead-letter topic, arrivals, exposures, summaries, alerts), the
relay's pull subscription and a subscription that keeps dead letters, the bucket, and the
bucket's notification configs (JSON_API_V1, OBJECT_FINALIZE) for ``raw/`` and ``quarantine/`` to
the objects topic; plus Kafka topic ``ccd-arrivals`` when Kafka is a bus backend.

Order matters: GCS (and fake-gcs-server) publishes only to topics that already exist, so topics
come before notification configs. Running it twice changes nothing (Terraform does the same in
production).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Any

from obsingest.logs import get_logger, log_event
from obsingest.settings import BusSettings, StoreSettings

log = get_logger("obsingest.setup")

RELAY_SUBSCRIPTION = "ccd-objects-relay"
DEFAULT_PREFIXES: tuple[str, ...] = ("raw/", "quarantine/")


@dataclass
class SetupReport:
    """What exists now, and which of it this run created."""

    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)

    def note(self, what: str, created: bool) -> None:
        (self.created if created else self.existing).append(what)
        log_event(log, "setup.created" if created else "setup.exists", resource=what)


def dlq_subscription(bus: BusSettings) -> str:
    """The subscription that keeps dead letters (a topic without one would drop them)."""
    return f"{bus.objects_dlq_topic}-hold"


def topics_of(bus: BusSettings) -> list[str]:
    return [
        bus.objects_topic,
        bus.objects_dlq_topic,
        bus.arrivals_topic,
        bus.exposures_topic,
        bus.summaries_topic,
        bus.alerts_topic,
    ]


def ensure_topic(publisher: Any, path: str, report: SetupReport) -> None:
    from google.api_core import exceptions as api_exceptions

    try:
        publisher.create_topic(request={"name": path})
        report.note(path, True)
    except api_exceptions.AlreadyExists:
        report.note(path, False)


def ensure_subscription(
    subscriber: Any, path: str, topic: str, report: SetupReport, ack_deadline: int = 60
) -> None:
    from google.api_core import exceptions as api_exceptions

    try:
        subscriber.create_subscription(
            request={"name": path, "topic": topic, "ack_deadline_seconds": ack_deadline}
        )
        report.note(path, True)
    except api_exceptions.AlreadyExists:
        report.note(path, False)


def ensure_bucket(client: Any, name: str, report: SetupReport) -> Any:
    bucket = client.lookup_bucket(name)
    if bucket is None:
        from google.api_core import exceptions as api_exceptions

        try:
            bucket = client.create_bucket(name)
            report.note(f"gs://{name}", True)
            return bucket
        except api_exceptions.Conflict:
            bucket = client.bucket(name)
    report.note(f"gs://{name}", False)
    return bucket


def ensure_notification(
    bucket: Any, project: str, topic: str, prefix: str, report: SetupReport
) -> None:
    """One OBJECT_FINALIZE notification config per prefix ('' = the whole bucket)."""
    from google.cloud.storage.notification import (
        JSON_API_V1_PAYLOAD_FORMAT,
        OBJECT_FINALIZE_EVENT_TYPE,
    )

    label = f"notification gs://{bucket.name}/{prefix}* -> {topic}"
    for existing in bucket.list_notifications():
        if (
            existing.topic_name == topic
            and (existing.blob_name_prefix or "") == prefix
            and OBJECT_FINALIZE_EVENT_TYPE in (existing.event_types or [])
        ):
            report.note(label, False)
            return
    bucket.notification(
        topic_name=topic,
        topic_project=project,
        event_types=[OBJECT_FINALIZE_EVENT_TYPE],
        payload_format=JSON_API_V1_PAYLOAD_FORMAT,
        blob_name_prefix=prefix or None,
    ).create()
    report.note(label, True)


def ensure_kafka_topic(
    bootstrap: str, topic: str, report: SetupReport, partitions: int = 6
) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until futures resolve
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=30
    )[topic]
    try:
        future.result(timeout=30)
        report.note(f"kafka:{topic}", True)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            report.note(f"kafka:{topic}", False)
        else:
            raise


def setup(
    bucket: str,
    bus: BusSettings | None = None,
    *,
    prefixes: tuple[str, ...] = DEFAULT_PREFIXES,
    relay_subscription: str = RELAY_SUBSCRIPTION,
    kafka_bootstrap: str | None = None,
    storage_client: Any = None,
) -> SetupReport:
    """Create whatever is missing; ``kafka_bootstrap`` None skips Kafka."""
    from google.cloud import pubsub_v1

    from obsingest.bus.pubsub import topic_path
    from obsingest.relay.pubsub import subscription_path
    from obsingest.store.gcs import GcsSettings, make_client

    bus = bus or BusSettings()
    project = bus.pubsub_project
    report = SetupReport()
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        for topic in topics_of(bus):
            ensure_topic(publisher, topic_path(project, topic), report)
        ensure_subscription(
            subscriber,
            subscription_path(project, relay_subscription),
            topic_path(project, bus.objects_topic),
            report,
        )
        ensure_subscription(
            subscriber,
            subscription_path(project, dlq_subscription(bus)),
            topic_path(project, bus.objects_dlq_topic),
            report,
        )
    finally:
        subscriber.close()
    client = storage_client or make_client(GcsSettings(project=project))
    gcs_bucket = ensure_bucket(client, bucket, report)
    for prefix in prefixes:
        ensure_notification(gcs_bucket, project, bus.objects_topic, prefix, report)
    if kafka_bootstrap:
        ensure_kafka_topic(kafka_bootstrap, bus.arrivals_topic, report)
    return report


def bucket_from_settings(store: StoreSettings) -> str | None:
    if store.url.startswith("gs://"):
        return store.url[len("gs://") :].split("/", 1)[0]
    return None


def kafka_bootstrap_from_settings(bus: BusSettings) -> str | None:
    """Kafka's address when Kafka is one of the bus backends (KAFKA_BOOTSTRAP_SERVERS wins)."""
    backends = {b.strip() for b in bus.backend.split(",")}
    if "kafka" not in backends:
        return None
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or bus.kafka_bootstrap_servers


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "setup",
        help="create topics, subscriptions, the bucket and its notification configs (idempotent)",
        description=(
            "Create, if missing: Pub/Sub topics ccd-objects, ccd-objects-dlq, ccd-arrivals, "
            "exposures, exposure-summaries, budget-alerts; the relay's pull subscription; the "
            "bucket; OBJECT_FINALIZE notification configs for raw/ and quarantine/ to "
            "ccd-objects; Kafka topic ccd-arrivals when Kafka is a bus backend. Uses "
            "PUBSUB_EMULATOR_HOST / STORAGE_EMULATOR_HOST when set (`obsingest stack env`)."
        ),
    )
    p.add_argument("--bucket", help="bucket name (default: from OBSINGEST_STORE_URL=gs://BUCKET)")
    p.add_argument("--project", help="Pub/Sub project (default: OBSINGEST_BUS_PUBSUB_PROJECT)")
    p.add_argument(
        "--prefix",
        action="append",
        dest="prefixes",
        help="notification prefix, repeatable (default: raw/ and quarantine/)",
    )
    p.add_argument("--subscription", default=RELAY_SUBSCRIPTION, help="relay subscription name")
    p.add_argument(
        "--kafka", help="Kafka bootstrap servers (default: when OBSINGEST_BUS_BACKEND has kafka)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from obsingest import logs

    logs.configure("WARNING")
    bus = BusSettings()
    if args.project:
        bus = bus.model_copy(update={"pubsub_project": args.project})
    bucket = args.bucket or bucket_from_settings(StoreSettings())
    if not bucket:
        print("obsingest setup: give --bucket or set OBSINGEST_STORE_URL=gs://BUCKET")
        return 2
    report = setup(
        bucket,
        bus,
        prefixes=tuple(args.prefixes) if args.prefixes else DEFAULT_PREFIXES,
        relay_subscription=args.subscription,
        kafka_bootstrap=args.kafka or kafka_bootstrap_from_settings(bus),
    )
    if args.json:
        print(json.dumps({"created": report.created, "existing": report.existing}, indent=2))
    else:
        for what in report.created:
            print(f"created  {what}")
        for what in report.existing:
            print(f"exists   {what}")
    return 0
