"""Idempotent provisioning of the local topics, subscriptions, bucket, notifications, Kafka
topics and databases (production: ``infra/terraform``), shared by the CLI, demo, tests and benchmarks.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.local.relay.settings import PUBSUB_MIN_DELIVERY_ATTEMPTS
from obsingest import defaults
from obsingest.errors import ServiceUnavailable
from obsingest.logs import get_logger, log_event
from obsingest.settings import BusSettings, hold_subscription

if TYPE_CHECKING:
    from infra.local.relay.settings import RelaySettings

log = get_logger("obsingest.provision")

#: Kafka record limit of topics that carry whole ~8 MiB chunk records
MAX_RECORD_BYTES = 16 * 1024 * 1024
#: partitions of a chunks topic: room for several assembler instances
CHUNK_TOPIC_PARTITIONS = 6
#: seconds one Pub/Sub admin call (create, get, update, delete) may take, retries included: one
#: that does not answer fails setup (and the facility's repair) in this, not in api_core's 600 s
ADMIN_TIMEOUT = 30.0


@dataclass
class SetupReport:
    """What exists now, and which of it this run created."""

    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)

    def note(self, what: str, created: bool) -> None:
        (self.created if created else self.existing).append(what)
        log_event(log, "setup.created" if created else "setup.exists", resource=what)


def bounded() -> dict[str, Any]:
    """``retry`` and ``timeout`` of one Pub/Sub admin call: ADMIN_TIMEOUT s, retries included."""
    from obsingest.retry import BUDGET, api_core_retry

    return {"retry": api_core_retry(BUDGET, ADMIN_TIMEOUT), "timeout": ADMIN_TIMEOUT}


def gcs_bounded() -> dict[str, Any]:
    """The same for a storage call: its client's own retry, for ADMIN_TIMEOUT s in all."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    return {"retry": DEFAULT_RETRY.with_timeout(ADMIN_TIMEOUT), "timeout": ADMIN_TIMEOUT}


@contextmanager
def answered(service: str, where: str, *silence: type[BaseException]) -> Iterator[None]:
    """What ``service`` raises when it does not answer (``silence``) as one ServiceUnavailable
    naming it: a line for the command line, not a traceback."""
    try:
        yield
    except silence as exc:
        raise ServiceUnavailable(
            f"{service} at {where} did not answer within {ADMIN_TIMEOUT:g} s ({type(exc).__name__}); "
            "run `obsingest stack up`"
        ) from exc


def ensure_topic(publisher: Any, path: str, report: SetupReport) -> None:
    from google.api_core import exceptions as api_exceptions

    try:
        publisher.create_topic(request={"name": path}, **bounded())
        report.note(path, True)
    except api_exceptions.AlreadyExists:
        report.note(path, False)


def relay_delivery_policy(
    bus: BusSettings, relay: RelaySettings, dead_letter_topic: str | None = None
) -> dict[str, Any]:
    """A subscription's dead-letter and retry fields from the relay's settings (raised to Pub/Sub's
    minimum attempts), so the relay dead-letters first, with its reason; Pub/Sub's count of each
    message's ``delivery_attempt`` is how the relay's counts survive its restarts."""
    from obsingest.bus.pubsub import topic_path

    topic = dead_letter_topic or relay.dead_letter_topic or bus.objects_dlq_topic
    return {
        "dead_letter_policy": {
            "dead_letter_topic": topic_path(bus.pubsub_project, topic),
            "max_delivery_attempts": max(relay.max_attempts, PUBSUB_MIN_DELIVERY_ATTEMPTS),
        },
        "retry_policy": {
            "minimum_backoff": {"seconds": int(relay.min_backoff), "nanos": int(relay.min_backoff % 1 * 1e9)},
            "maximum_backoff": {"seconds": int(relay.max_backoff), "nanos": int(relay.max_backoff % 1 * 1e9)},
        },
    }


#: the topic of a subscription whose topic was deleted: it receives nothing, even once the
#: topic is made again
DELETED_TOPIC = "_deleted-topic_"


def ensure_subscription(
    subscriber: Any,
    path: str,
    topic: str,
    report: SetupReport,
    ack_deadline: int = 60,
    fields: dict[str, Any] | None = None,
) -> None:
    """Create the pull subscription unless it exists; an existing one gets the policy ``fields``,
    one its topic's deletion detached for good (``DELETED_TOPIC``) is made again."""
    from google.api_core import exceptions as api_exceptions

    fields = fields or {}
    request = {"name": path, "topic": topic, "ack_deadline_seconds": ack_deadline, **fields}
    try:
        subscriber.create_subscription(request=request, **bounded())
        report.note(path, True)
    except api_exceptions.AlreadyExists:
        if subscriber.get_subscription(request={"subscription": path}, **bounded()).topic == DELETED_TOPIC:
            subscriber.delete_subscription(request={"subscription": path}, **bounded())
            subscriber.create_subscription(request=request, **bounded())
            report.note(path, True)
            return
        report.note(path, False)
        if fields:
            subscriber.update_subscription(
                request={"subscription": {"name": path, **fields}, "update_mask": {"paths": list(fields)}},
                **bounded(),
            )


def subscribe(project: str, topic: str, subscription: str, ack_deadline: int = 10) -> str:
    """The path of the pull subscription on ``topic``, created if absent (before publishing: a
    new subscription sees only later messages)."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    from obsingest.bus.pubsub import topic_path
    from obsingest.bus.pull import subscription_path

    path = subscription_path(project, subscription)
    client = pubsub_v1.SubscriberClient()
    try:
        ensure_subscription(
            client, path, topic_path(project, topic), SetupReport(), ack_deadline=ack_deadline
        )
    finally:
        client.close()
    return path


def ensure_bucket(client: Any, name: str, report: SetupReport) -> Any:
    bucket = client.lookup_bucket(name, **gcs_bounded())
    if bucket is None:
        from google.api_core import exceptions as api_exceptions

        try:
            bucket = client.create_bucket(name, **gcs_bounded())
            report.note(f"gs://{name}", True)
            return bucket
        except api_exceptions.Conflict:
            bucket = client.bucket(name)
    report.note(f"gs://{name}", False)
    return bucket


def ensure_notification(bucket: Any, project: str, topic: str, prefix: str, report: SetupReport) -> None:
    """One OBJECT_FINALIZE notification config per prefix ('' = the whole bucket); the topic
    must exist first: GCS publishes only to existing topics."""
    from google.cloud.storage.notification import JSON_API_V1_PAYLOAD_FORMAT, OBJECT_FINALIZE_EVENT_TYPE

    label = f"notification gs://{bucket.name}/{prefix}* -> {topic}"
    for existing in bucket.list_notifications(**gcs_bounded()):
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
    ).create(**gcs_bounded())
    report.note(label, True)


def ensure_kafka_topics(
    bootstrap: str,
    partitions: dict[str, int],
    report: SetupReport | None = None,
    config: dict[str, str] | None = None,
) -> SetupReport:
    """Create each topic (name -> partitions) unless it exists, and wait."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    report = report or SetupReport()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until futures resolve
    topics = [
        NewTopic(name, num_partitions=n, replication_factor=1, config=dict(config or {}))
        for name, n in partitions.items()
    ]
    futures = admin.create_topics(topics, operation_timeout=30)
    for name, future in futures.items():
        try:
            future.result(timeout=30)
            report.note(f"kafka:{name}", True)
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                report.note(f"kafka:{name}", False)
            else:
                raise
    return report


def create_chunk_topics(bootstrap: str, partitions: dict[str, int]) -> SetupReport:
    """Topics (name -> partitions) that take whole chunk records."""
    return ensure_kafka_topics(bootstrap, partitions, config={"max.message.bytes": str(MAX_RECORD_BYTES)})


def delete_kafka_topics(bootstrap: str, names: list[str]) -> None:
    """Delete topics; raises the first failure."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=10).values():
        future.result(timeout=10)


class KafkaNotRunning(ServiceUnavailable, reason="kafka-unavailable"):
    """No broker answers at the bootstrap address."""


def require_kafka(bootstrap: str, timeout: float = 5.0) -> None:
    """Raise KafkaNotRunning, naming the fix, when no broker answers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as exc:
        raise KafkaNotRunning(
            f"Kafka is not reachable at {bootstrap} ({exc}); run `obsingest stack up` "
            "(or set KAFKA_BOOTSTRAP_SERVERS)"
        ) from None
    if not metadata.brokers:
        raise KafkaNotRunning(f"Kafka at {bootstrap} lists no broker; run `obsingest stack up`")


def _admin_sql(admin_url: str, sql: str) -> None:
    """Run ``sql`` outside a transaction on the server of ``admin_url`` (CREATE/DROP DATABASE)."""
    import psycopg
    from sqlalchemy.engine import make_url

    conninfo = make_url(admin_url).set(drivername="postgresql")
    with psycopg.connect(conninfo.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(sql)


def create_database(admin_url: str, prefix: str) -> str:
    """CREATE DATABASE <prefix>_<hex> on the server of ``admin_url``; its SQLAlchemy URL."""
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    """DROP DATABASE of ``url`` (made by ``create_database``) on the server of ``admin_url``."""
    from sqlalchemy.engine import make_url

    _admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def setup(
    bucket: str,
    bus: BusSettings | None = None,
    *,
    prefixes: tuple[str, ...] = defaults.NOTIFIED_PREFIXES,
    relay_subscription: str = defaults.RELAY_SUBSCRIPTION,
    manifest_relay_subscription: str = defaults.MANIFEST_RELAY_SUBSCRIPTION,
    kafka_bootstrap: str | None = None,
    storage_client: Any = None,
    relay: RelaySettings | None = None,
) -> SetupReport:
    """Everything the direct path needs: topics, the two relays' subscriptions (each with its
    own DLQ), the dead-letter and parked holds (the streaming summary's dead letters' too), the
    bucket and its notifications, and Kafka's topics with ``kafka_bootstrap``. Also reconcile's
    repair after an emulator lost its state."""
    import requests
    from google.api_core import exceptions as api_exceptions
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    from infra.local.relay.settings import RelaySettings
    from obsingest.bus.pubsub import topic_path
    from obsingest.bus.pull import subscription_path
    from obsingest.store.gcs import GcsSettings, make_client

    bus = bus or BusSettings()
    project = bus.pubsub_project
    report = SetupReport()
    silent = (api_exceptions.RetryError, api_exceptions.DeadlineExceeded, api_exceptions.ServiceUnavailable)
    pubsub_at = os.environ.get("PUBSUB_EMULATOR_HOST") or "pubsub.googleapis.com"
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        with answered("Pub/Sub", pubsub_at, *silent):
            topics = (
                bus.objects_topic,
                bus.objects_dlq_topic,
                bus.objects_parked_topic,
                bus.arrivals_topic,
                bus.exposures_ingested_topic,
                bus.exposures_topic,
                bus.exposures_dlq_topic,
                bus.summaries_topic,
                bus.alerts_topic,
                defaults.EVENTS_DLQ_TOPIC,
            )
            for topic in topics:
                ensure_topic(publisher, topic_path(project, topic), report)
            relay_policy = functools.partial(relay_delivery_policy, bus, relay or RelaySettings())
            subscriptions = (  # (subscription, its topic, its delivery policy)
                (relay_subscription, bus.objects_topic, relay_policy(bus.objects_dlq_topic)),
                (manifest_relay_subscription, bus.exposures_topic, relay_policy(bus.exposures_dlq_topic)),
                (bus.objects_dlq_hold, bus.objects_dlq_topic, None),
                (hold_subscription(bus.exposures_dlq_topic), bus.exposures_dlq_topic, None),
                (hold_subscription(bus.objects_parked_topic), bus.objects_parked_topic, None),
                (hold_subscription(defaults.EVENTS_DLQ_TOPIC), defaults.EVENTS_DLQ_TOPIC, None),
            )
            for name, topic, policy in subscriptions:
                path = subscription_path(project, name)
                ensure_subscription(subscriber, path, topic_path(project, topic), report, fields=policy)
    finally:
        subscriber.close()
        publisher.stop()
    client = storage_client or make_client(GcsSettings(project=project))
    with answered("GCS", client.api_endpoint, *silent, requests.ConnectionError, requests.Timeout):
        gcs_bucket = ensure_bucket(client, bucket, report)
        for prefix in prefixes:
            ensure_notification(gcs_bucket, project, bus.objects_topic, prefix, report)
    if kafka_bootstrap:
        require_kafka(kafka_bootstrap)
        kafka_topics = {bus.arrivals_topic: 6, bus.exposures_ingested_topic: 1}
        ensure_kafka_topics(kafka_bootstrap, kafka_topics, report)
    return report
