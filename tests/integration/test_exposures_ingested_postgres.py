"""Exactly one ExposureIngested per exposure on PostgreSQL (READ COMMITTED) and the Pub/Sub
emulator, under real concurrency and real process death:

- the last CCDs of an exposure registered at the same moment by several processes, and by
  several threads of one process: one event each, counted once;
- the manifest recorded after the CCDs, also racing the last CCD and pushed several times at
  once: one event each;
- a process SIGKILLed between its registering commit and its check, or between writing the
  event and publishing it: the facility service's pass emits (or publishes) it, once.

Every message is read back from a Pub/Sub subscription on the ``exposures-ingested`` topic of a
project of this test's own. The store is a local directory shared by the processes (the store
is not what is tested here).
"""

from __future__ import annotations

import base64
import multiprocessing
import os
import signal
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from obsingest.dataid import DataId, make_exposure_id
from obsingest.messages import ExposureIngested, ExposureManifest, utcnow
from obsingest.settings import BusSettings, RegistrySettings

pytestmark = pytest.mark.integration

INSTRUMENT = "LSSTComCam"
DAY_OBS = 20261122


# -- the namespace ------------------------------------------------------------------------------
class Namespace:
    """A fresh Pub/Sub project (arrivals and exposures-ingested topics, a subscription on the
    latter), a local store directory and a PostgreSQL database."""

    def __init__(self, registry_url: str, store_dir: Path) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        from infra.local.provision import SetupReport, ensure_topic, subscribe
        from obsingest.bus.pubsub import topic_path

        self.project = f"ingested-{uuid.uuid4().hex[:10]}"
        self.bus = BusSettings(backend="pubsub", pubsub_project=self.project)
        publisher = pubsub_v1.PublisherClient()
        try:
            for topic in (self.bus.arrivals_topic, self.bus.exposures_ingested_topic):
                ensure_topic(publisher, topic_path(self.project, topic), SetupReport())
        finally:
            publisher.stop()
        subscribe(self.project, self.bus.exposures_ingested_topic, "ingested-test")
        self.registry_url = registry_url
        self.store_dir = store_dir

    def received(self, quiet: float = 2.0) -> list[ExposureIngested]:
        """Everything on the subscription until it stays empty for ``quiet`` s (acked)."""
        from obsingest.bus.pull import PubSubPullSource

        source = PubSubPullSource(self.project, "ingested-test")
        out: list[ExposureIngested] = []
        try:
            while batch := source.pull(100, quiet):
                out += [ExposureIngested.decode(d.data) for d in batch]
                source.ack([d.ack_id for d in batch])
        finally:
            source.close()
        return out


def build_service(ns: Namespace, pool_size: int = 4) -> Any:
    from functions.register.service import RegisterService
    from obsingest.bus.pubsub import PubSubPublisher
    from obsingest.registry import Registry
    from obsingest.store.local import LocalDirStore

    registry = Registry.open(RegistrySettings(url=ns.registry_url, pool_size=pool_size))
    return RegisterService(
        LocalDirStore(ns.store_dir),
        registry,
        PubSubPublisher(ns.project),
        arrivals_topic=ns.bus.arrivals_topic,
        ingested_topic=ns.bus.exposures_ingested_topic,
    )


def small_ccd(data_id: DataId) -> bytes:
    """A real compressed CCD of the simulator's small size (~150 kB)."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    obs_start = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    spec = CcdSpec(
        data_id.instrument,
        data_id.exposure,
        data_id.detector,
        data_id.day_obs,
        obs_start,
        15.0,
        "r",
        "small",
        0,
    )
    return compress_fits(generate_raw_ccd(spec), threads=1)


def store_ccds(ns: Namespace, data_ids: list[DataId]) -> None:
    from obsingest.store.local import LocalDirStore
    from producers.uploader import DirectUploader

    uploader = DirectUploader(LocalDirStore(ns.store_dir, notify=False))
    for data_id in data_ids:
        uploader.send(data_id, small_ccd(data_id), utcnow())


def deliver(service: Any, data_id: DataId) -> str:
    from obsingest.store.notifications import from_storage_cloudevent, storage_cloudevent

    event = storage_cloudevent(service.store.stat(data_id.object_name()))
    return service.handle(from_storage_cloudevent(event, event["data"])).status


def manifest(exposure: int, detectors: list[int]) -> ExposureManifest:
    now = datetime.now(UTC)
    return ExposureManifest(INSTRUMENT, exposure, DAY_OBS, detectors, now, 15.0, "r", now)


def exposure_ids(first_seq: int, count: int) -> list[int]:
    return [make_exposure_id(DAY_OBS, first_seq + n) for n in range(count)]


def closings(service: Any) -> list[Any]:
    """Record every closing the service's closer makes (outcome, counted)."""
    seen: list[Any] = []
    close = service.closer.close

    def recorded(instrument: str, exposure: int, published: Any = ()) -> Any:
        result = close(instrument, exposure, published)
        seen.append(result)
        return result

    service.closer.close = recorded
    return seen


@pytest.fixture
def ns(postgres: str, pubsub: Any, tmp_path: Path) -> Namespace:
    return Namespace(postgres, tmp_path / "store")


# -- child processes (spawned: a real process each, its own pool and publisher) ----------------
def _register_in_child(
    ns: Namespace, detector: int, exposures: list[int], barrier: Any, results: Any
) -> None:
    service = build_service(ns, pool_size=2)
    seen = closings(service)
    for exposure in exposures:
        barrier.wait(timeout=60)  # the last CCDs of this exposure, all at once
        deliver(service, DataId(INSTRUMENT, exposure, detector))
    results.put([(c.exposure, c.outcome, c.counted) for c in seen])
    service.registry.close()


def _die_in_child(ns: Namespace, data_id: DataId, where: str) -> None:
    """Register ``data_id``, then SIGKILL this process ``where``: before its check, or after
    its check wrote the event but before it is published."""
    service = build_service(ns, pool_size=2)
    service.closer.check.lease_seconds = 1.0  # the drain may take its row 1 s later

    def die(*args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if where == "before-check":
        service.closer.close_quietly = die
    else:
        service.announcer.publish_message = die
    deliver(service, data_id)


def _spawn(target: Any, *args: Any) -> Any:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    return process


# -- the tests ----------------------------------------------------------------------------------
def test_last_ccds_registered_at_once_by_several_processes_give_one_event(ns: Namespace) -> None:
    from obsingest.registry.manifests import record_manifest

    workers, exposures = 5, exposure_ids(101, 6)
    setup = build_service(ns)
    for exposure in exposures:
        record_manifest(setup.registry, manifest(exposure, list(range(workers))))
    store_ccds(ns, [DataId(INSTRUMENT, e, d) for e in exposures for d in range(workers)])
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(workers), context.Queue()
    children = [_spawn(_register_in_child, ns, det, exposures, barrier, results) for det in range(workers)]
    reports = [results.get(timeout=240) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    outcomes = Counter((e, o) for report in reports for e, o, _ in report)
    counted = Counter(e for report in reports for e, _, c in report if c)
    for exposure in exposures:
        assert outcomes[(exposure, "emitted")] == 1, outcomes
        assert counted[exposure] == 1
    events = ns.received()
    assert sorted(e.exposure for e in events) == exposures, outcomes
    # (stored before the processes started: readout -> registered includes their start-up)
    assert all(e.registered == e.expected == workers for e in events)
    print("outcomes of the processes' checks:", Counter(o for _, o in outcomes.elements()))
    assert setup.registry.outbox.status().pending == 0
    setup.registry.close()


def test_last_ccds_registered_at_once_by_threads_give_one_event(ns: Namespace) -> None:
    from obsingest.registry.manifests import record_manifest

    service = build_service(ns, pool_size=9)
    seen = closings(service)
    exposures = exposure_ids(201, 12)
    for exposure in exposures:
        record_manifest(service.registry, manifest(exposure, list(range(9))))
    data_ids = [DataId(INSTRUMENT, e, d) for e in exposures for d in range(9)]
    store_ccds(ns, data_ids)
    barrier = threading.Barrier(9)

    def one_detector(detector: int) -> None:
        for exposure in exposures:
            barrier.wait(timeout=60)
            assert deliver(service, DataId(INSTRUMENT, exposure, detector)) == "registered"

    with ThreadPoolExecutor(9) as pool:
        list(pool.map(one_detector, range(9)))
    emitted = Counter(c.exposure for c in seen if c.outcome == "emitted")
    assert emitted == Counter(exposures)
    assert Counter(c.exposure for c in seen if c.counted) == Counter(exposures)
    assert sorted(e.exposure for e in ns.received()) == exposures
    service.registry.close()


def test_a_manifest_after_its_ccds_even_racing_the_last_one_gives_one_event(ns: Namespace) -> None:
    from functions.register.manifest_push import handle_push

    service = build_service(ns, pool_size=8)
    after, racing = exposure_ids(301, 3), exposure_ids(311, 6)
    data_ids = [DataId(INSTRUMENT, e, d) for e in after + racing for d in range(4)]
    store_ccds(ns, data_ids)
    for data_id in data_ids:
        if not (data_id.exposure in racing and data_id.detector == 3):
            deliver(service, data_id)
    assert ns.received(quiet=1.0) == []  # no manifest yet: nothing is guessed

    def push_manifest(exposure: int, n: int) -> tuple[str, int]:
        data = manifest(exposure, [0, 1, 2, 3]).encode()
        envelope = {"message": {"data": base64.b64encode(data).decode(), "messageId": f"m{n}"}}
        return handle_push(envelope, service.registry, service.closer.close)

    # every CCD first, then the same manifest pushed three times at once (redeliveries)
    with ThreadPoolExecutor(6) as pool:
        pushes = [(e, n) for e in after for n in range(3)]
        replies = list(pool.map(lambda a: push_manifest(*a), pushes))
    assert all(status == 200 for _, status in replies)
    # the manifest and the last CCD at the same moment
    for exposure in racing:
        barrier = threading.Barrier(2)

        def last_ccd(exposure: int = exposure, barrier: Any = barrier) -> str:
            barrier.wait(timeout=30)
            return deliver(service, DataId(INSTRUMENT, exposure, 3))

        def its_manifest(exposure: int = exposure, barrier: Any = barrier) -> Any:
            barrier.wait(timeout=30)
            return push_manifest(exposure, 0)

        with ThreadPoolExecutor(2) as pool:
            ccd, pushed = pool.submit(last_ccd), pool.submit(its_manifest)
            assert ccd.result() == "registered" and pushed.result()[1] == 200
    events = ns.received()
    assert sorted(e.exposure for e in events) == sorted(after + racing)
    assert all(e.manifest_known and e.detectors == [0, 1, 2, 3] for e in events)
    service.registry.close()


@pytest.mark.parametrize("where", ["before-check", "before-publish"])
def test_a_process_killed_before_its_check_or_its_publish_is_healed_by_the_facility_pass(
    ns: Namespace, where: str
) -> None:
    import time

    from functions.register.facility.settings import ReconcileSettings, RedriveSettings
    from functions.register.facility.wiring import build_facility
    from obsingest.registry.ingested import event_id
    from obsingest.registry.manifests import record_manifest

    service = build_service(ns)
    [exposure] = exposure_ids(401, 1)
    record_manifest(service.registry, manifest(exposure, [0, 1]))
    first, last = DataId(INSTRUMENT, exposure, 0), DataId(INSTRUMENT, exposure, 1)
    store_ccds(ns, [first, last])
    assert deliver(service, first) == "registered"
    child = _spawn(_die_in_child, ns, last, where)
    child.join(timeout=120)
    assert child.exitcode == -signal.SIGKILL
    # the last CCD is committed; its exposure's event is not (yet) out
    assert {r["detector"] for r in service.registry.datasets()} == {0, 1}
    row = service.registry.outbox.row(event_id(INSTRUMENT, exposure))
    assert (row is None) == (where == "before-check")
    assert ns.received(quiet=1.0) == []
    time.sleep(1.2)  # the dead process's lease on the event row expires
    settings = ReconcileSettings(grace=0.0, canary=False, prefixes=("raw/",))
    back_office = build_facility(service, ns.bus, settings, RedriveSettings(enabled=False))
    report = back_office.run_pass()
    assert not report.errors and report.reconcile is not None and report.reconcile.missing == 0
    assert report.ingested == (1 if where == "before-check" else 0)
    [event] = ns.received()
    assert (event.exposure, event.registered, event.missing_detectors) == (exposure, 2, [])
    assert back_office.run_pass().ingested == 0 and ns.received(quiet=1.0) == []
    # Killed before its check, the process also never marked its CCD's announcement (the check
    # marks it): that row stays pending, leased, and a drain announces it once more after the
    # lease (at-least-once; subscribers deduplicate on the dataset id).
    assert service.registry.outbox.status().pending == (1 if where == "before-check" else 0)
    service.registry.close()
