"""The direct-upload path on the real stack, over real HTTP.

GCS emulator upload -> bucket notification -> Pub/Sub -> relay -> HTTP push to the register
function (functions-framework subprocess) -> PostgreSQL registry -> ArrivalEvent on Pub/Sub ->
a subscriber. Then redelivery, conflicting bytes, unauthenticated pushes and a function that
answers 503 every time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import requests

from infra.local.provision import setup
from infra.local.relay import HttpPushTarget, Relay, RelaySettings, push_envelope
from infra.local.relay.dead_letter import PubSubDeadLetter
from obsingest.bus.pubsub import PubSubPublisher, topic_path
from obsingest.bus.pull import Delivery, PubSubPullSource, SubscriberThread, subscription_path
from obsingest.dataid import DataId, make_exposure_id
from obsingest.messages import ArrivalEvent, utcnow
from obsingest.registry import Registry
from obsingest.settings import BusSettings, RegistrySettings
from obsingest.store.gcs import GcsSettings, GcsStore
from obsingest.store.notifications import gcs_notification_message
from producers.uploader import DirectUploader
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService, unique_name
from tests.integration.fixtures.private_stack import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAY_OBS = 20261122
INSTRUMENT = "LSSTComCam"
EXPOSURES = [make_exposure_id(DAY_OBS, 401), make_exposure_id(DAY_OBS, 402)]
DETECTORS = range(9)


def small_ccd(exposure: int, detector: int, seed: int = 0) -> bytes:
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    spec = CcdSpec(
        INSTRUMENT,
        exposure,
        detector,
        DAY_OBS,
        datetime(2026, 11, 22, 3, 0, tzinfo=UTC),
        15.0,
        "r",
        "small",
        seed,
    )
    return compress_fits(generate_raw_ccd(spec), threads=1)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Pipeline:
    project: str
    bus: BusSettings
    bucket: str
    registry_url: str
    store: GcsStore
    registry: Registry
    function: FunctionProcess
    relay: Relay
    arrivals: list[ArrivalEvent] = field(default_factory=list)
    subscriber: Any = None

    def function_env(self) -> dict[str, str]:
        return function_env(self.project, self.bus, self.bucket, self.registry_url)

    def unique_arrivals(self) -> dict[str, ArrivalEvent]:
        return {str(a.dataset_id): a for a in list(self.arrivals)}

    def settle(self, timeout: float = 60) -> None:
        """Wait until the relay has pushed everything and the subscriber is quiet."""
        assert self.relay.wait_idle(quiet=1.0, timeout=timeout), "relay did not drain"
        wait_for(lambda: self.subscriber.idle_for() > 1.0, timeout, "subscriber to be quiet")


def function_env(project: str, bus: BusSettings, bucket: str, registry_url: str) -> dict[str, str]:
    return {
        "OBSINGEST_REGISTRY_URL": registry_url,
        "OBSINGEST_REGISTRY_POOL_SIZE": "4",
        "OBSINGEST_STORE_URL": f"gs://{bucket}",
        "OBSINGEST_BUS_BACKEND": "pubsub",
        "OBSINGEST_BUS_PUBSUB_PROJECT": project,
        "OBSINGEST_BUS_ARRIVALS_TOPIC": bus.arrivals_topic,
        "OBSINGEST_GCS_PROJECT": project,
        "OBSINGEST_FUNCTION_PUSH_AUTH": "false",
    }


def provision(gcs: GcsService, pubsub: PubSubService, name: str) -> tuple[BusSettings, str, str, str]:
    """Fresh topics, a bucket notifying the objects topic, the relay's and an arrivals
    subscription, each removed with its service's handle: (bus, bucket, relay subscription,
    arrivals subscription)."""
    project = pubsub.project_id
    names = {k: unique_name(k) for k in ("objects", "dlq", "arrivals", "exposures", "sums", "al")}
    bus = BusSettings(
        backend="pubsub",
        pubsub_project=project,
        objects_topic=names["objects"],
        objects_dlq_topic=names["dlq"],
        arrivals_topic=names["arrivals"],
        exposures_topic=names["exposures"],
        summaries_topic=names["sums"],
        alerts_topic=names["al"],
    )
    bucket, relay_sub = unique_name(name), unique_name("relay")
    setup(bucket, bus, relay_subscription=relay_sub)
    gcs.buckets.append(bucket)
    pubsub.topics += [topic_path(project, t) for t in names.values()]
    pubsub.subscriptions += [
        subscription_path(project, relay_sub),
        subscription_path(project, bus.objects_dlq_hold),
    ]
    arrivals_sub = pubsub.new_subscription(topic_path(project, bus.arrivals_topic), "arrivals")
    return bus, bucket, relay_sub, arrivals_sub


@pytest.fixture(scope="module")
def pipeline(
    gcs: GcsService,
    pubsub: PubSubService,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pipeline]:
    project = pubsub.project_id
    bus, bucket, relay_sub, arrivals_sub = provision(gcs, pubsub, "direct-path")

    registry_url = postgres_server.create_database("direct_path")
    registry = Registry.open(RegistrySettings(url=registry_url))
    logs = tmp_path_factory.mktemp("function")
    function = FunctionProcess(
        function_env(project, bus, bucket, registry_url), logs / "function.log"
    ).start()
    relay = Relay(
        PubSubPullSource(project, relay_sub),
        HttpPushTarget(function.url, timeout=30),
        PubSubDeadLetter(project, bus.objects_dlq_topic),
        RelaySettings(max_attempts=5, min_backoff=0.0, max_backoff=1.0, concurrency=8),
        subscription_path=subscription_path(project, relay_sub),
    )
    pipe = Pipeline(
        project=project,
        bus=bus,
        bucket=bucket,
        registry_url=registry_url,
        store=GcsStore(bucket, settings=GcsSettings(project=project)),
        registry=registry,
        function=function,
        relay=relay,
    )
    pipe.subscriber = SubscriberThread(
        project, arrivals_sub, lambda d: pipe.arrivals.append(ArrivalEvent.decode(d.data))
    ).start()
    relay.start()
    try:
        yield pipe
    finally:
        relay.stop()
        pipe.subscriber.stop()
        function.stop()
        registry.close()
        postgres_server.drop_database(registry_url)


@pytest.fixture(scope="module")
def uploaded(pipeline: Pipeline) -> dict[DataId, bytes]:
    """2 exposures x 9 small CCDs, uploaded concurrently, every arrival received."""
    ccds = {
        DataId(INSTRUMENT, exposure, detector): small_ccd(exposure, detector)
        for exposure in EXPOSURES
        for detector in DETECTORS
    }
    uploader = DirectUploader(pipeline.store, producer="test")
    readout = utcnow()

    def ship(item: tuple[DataId, bytes]) -> str:
        data_id, data = item
        return uploader.send(data_id, data, readout, utcnow()).status

    with ThreadPoolExecutor(9) as pool:
        statuses = list(pool.map(ship, ccds.items()))
    assert statuses == ["stored"] * len(ccds)
    wait_for(lambda: len(pipeline.unique_arrivals()) >= len(ccds), 90, "18 arrivals")
    pipeline.settle()
    return ccds


def test_every_ccd_is_registered_once_and_announced_with_ordered_stage_times(
    pipeline: Pipeline, uploaded: dict[DataId, bytes]
) -> None:
    rows = pipeline.registry.datasets()
    assert len(rows) == len(uploaded) == 18
    assert sorted((r["exposure"], r["detector"]) for r in rows) == sorted(
        (d.exposure, d.detector) for d in uploaded
    )
    arrivals = pipeline.unique_arrivals()
    assert set(arrivals) == {r["id"] for r in rows}
    for event in arrivals.values():
        assert event.uri.startswith(f"gs://{pipeline.bucket}/raw/")
        stamps = [
            event.readout_time,
            event.compressed_time,
            event.stored_time,
            event.registered_time,
            event.published_time,
        ]
        assert all(s is not None for s in stamps), event
        assert stamps == sorted(cast(list[datetime], stamps)), event
    assert pipeline.relay.counts()["dead_lettered"] == 0


def test_replayed_and_concurrent_notifications_change_nothing(
    pipeline: Pipeline, uploaded: dict[DataId, bytes]
) -> None:
    before = pipeline.registry.datasets()
    received_before = len(pipeline.arrivals)
    publisher = PubSubPublisher(pipeline.project)
    objects = [pipeline.store.stat(d.object_name()) for d in uploaded]
    try:
        # every notification again through Pub/Sub, the first six twice (concurrent pushes)
        for obj in objects + objects[:6]:
            data, attributes = gcs_notification_message(obj)
            publisher.publish(pipeline.bus.objects_topic, data, attributes=attributes)
    finally:
        publisher.close()
    # and some straight to the function over HTTP, all at once
    envelopes = [
        push_envelope(Delivery("", f"direct-{i}", *gcs_notification_message(obj)), "direct")
        for i, obj in enumerate(objects[:6] * 2)
    ]
    with ThreadPoolExecutor(12) as pool:
        answers = list(
            pool.map(lambda e: requests.post(pipeline.function.url, json=e, timeout=30), envelopes)
        )
    assert [a.status_code for a in answers] == [200] * 12
    assert all(a.text.startswith("duplicate") for a in answers), [a.text for a in answers]
    wait_for(lambda: len(pipeline.arrivals) >= received_before + 24 + 12, 60, "republished")
    pipeline.settle()

    assert pipeline.registry.datasets() == before  # same rows, same ingest times
    assert len(pipeline.arrivals) > 18
    assert len(pipeline.unique_arrivals()) == 18  # subscriber dedup on dataset id
    assert pipeline.relay.counts()["dead_lettered"] == 0


def test_different_bytes_under_a_registered_data_id_are_quarantined_and_reported(
    pipeline: Pipeline, uploaded: dict[DataId, bytes]
) -> None:
    victim = DataId(INSTRUMENT, EXPOSURES[0], 4)
    other = small_ccd(victim.exposure, victim.detector, seed=99)
    assert other != uploaded[victim]
    result = DirectUploader(pipeline.store, producer="test").send(victim, other, utcnow())
    assert result.status == "conflict"
    assert result.object_name.startswith("quarantine/")

    def recorded() -> list[dict]:
        return [r for r in pipeline.registry.quarantined() if r["reason"] == "checksum-conflict"]

    wait_for(lambda: bool(recorded()), 60, "the conflict to be recorded")
    [row] = recorded()
    assert (row["exposure"], row["detector"]) == (victim.exposure, victim.detector)
    assert row["object_uri"] == f"gs://{pipeline.bucket}/{result.object_name}"
    # the registered dataset and the stored original are untouched
    assert pipeline.store.read(victim.object_name()) == uploaded[victim]
    assert len(pipeline.registry.datasets()) == 18


def test_unauthenticated_push_is_refused_when_auth_is_on(
    pipeline: Pipeline, uploaded: dict[DataId, bytes], tmp_path: Path
) -> None:
    env = {**pipeline.function_env(), "OBSINGEST_FUNCTION_PUSH_AUTH": "true"}
    env["OBSINGEST_FUNCTION_PUSH_AUDIENCE"] = "https://register.example"
    server = FunctionProcess(env, tmp_path / "auth-function.log").start()
    try:
        obj = pipeline.store.stat(DataId(INSTRUMENT, EXPOSURES[1], 0).object_name())
        data, attributes = gcs_notification_message(obj)
        envelope = push_envelope(Delivery("", "auth-1", data, attributes), "s")
        quarantined = len(pipeline.registry.quarantined())
        anonymous = requests.post(server.url, json=envelope, timeout=30)
        forged = requests.post(
            server.url, json=envelope, headers={"Authorization": "Bearer not.a.jwt"}, timeout=30
        )
    finally:
        server.stop()
    assert anonymous.status_code == 401
    assert forged.status_code == 403
    assert len(pipeline.registry.quarantined()) == quarantined  # refused before any work


def test_a_function_answering_503_every_time_dead_letters_with_the_reason(
    pipeline: Pipeline, uploaded: dict[DataId, bytes], pubsub: PubSubService, tmp_path: Path
) -> None:
    # the registry is down (nothing listens on its port): every push is a retriable 503
    dead_port = free_port()
    env = {
        **pipeline.function_env(),
        "OBSINGEST_REGISTRY_URL": f"postgresql+psycopg://postgres@127.0.0.1:{dead_port}/x",
        "OBSINGEST_REGISTRY_RETRY_ATTEMPTS": "2",
    }
    server = FunctionProcess(env, tmp_path / "down-function.log").start()
    topic = pubsub.new_topic("objects-503")
    dlq_topic = pubsub.new_topic("dlq-503")
    subscription = pubsub.new_subscription(topic, "relay-503", ack_deadline_seconds=30)
    dlq_hold = pubsub.new_subscription(dlq_topic, "dlq-hold-503")
    obj = pipeline.store.stat(DataId(INSTRUMENT, EXPOSURES[1], 1).object_name())
    data, attributes = gcs_notification_message(obj)
    pubsub.publisher().publish(topic, data, **attributes).result(timeout=30)
    relay = Relay(
        PubSubPullSource(pipeline.project, subscription),
        HttpPushTarget(server.url, timeout=30),
        PubSubDeadLetter(pipeline.project, dlq_topic),
        RelaySettings(max_attempts=3, min_backoff=0.0, max_backoff=0.0),
        subscription_path=subscription,
    )
    try:
        deadline = time.monotonic() + 60
        while relay.counts()["dead_lettered"] == 0 and time.monotonic() < deadline:
            relay.run_once(timeout=2.0)
    finally:
        server.stop()
    assert (
        relay.counts()["dead_lettered"] == 1
        and relay.counts()["nacked"] == 2
        and relay.counts()["acked"] == 0
    )

    source = PubSubPullSource(pipeline.project, dlq_hold)
    letters: list[Delivery] = []

    def got_letters() -> bool:
        letters.extend(source.pull(10, 2.0))
        return bool(letters)

    wait_for(got_letters, 30, "a dead letter")
    [letter] = letters
    assert json.loads(letter.data)["name"] == obj.name
    assert letter.attributes["dlq_status"] == "503"
    assert letter.attributes["dlq_attempts"] == "3"
    assert letter.attributes["dlq_reason"].startswith("HTTP 503: retriable")
    assert letter.attributes["objectId"] == obj.name
    # the original was acked: nothing left on the relay's subscription
    assert PubSubPullSource(pipeline.project, subscription).pull(10, 2.0) == []
