"""The register service closes exposures: one ExposureIngested per exposure (last CCD, manifest
after the CCDs, redeliveries, a bus outage, a process killed between commit and check), and the
per-exposure metrics, counted once; the facility's sweep and deadline."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from functions.register.facility.settings import ReconcileSettings, RedriveSettings
from functions.register.facility.wiring import build_facility
from functions.register.manifest_push import handle_push
from functions.register.service import RegisterService
from obsingest.dataid import DataId
from obsingest.messages import ExposureIngested, ExposureManifest
from obsingest.metrics import Metrics
from obsingest.registry.manifests import record_manifest
from obsingest.settings import BusSettings
from obsingest.store.notifications import from_storage_cloudevent, storage_cloudevent
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd
from tests.unit.functions.register.test_announce import BusDown

pytestmark = pytest.mark.unit

E = 2026112200001
COUNTED = "obsingest_exposures_completed_total"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry(), strict=True)


@pytest.fixture
def service(env, metrics) -> RegisterService:
    """The env's service, recording into a catalogue of its own."""
    env.service = RegisterService(env.store, env.registry, env.bus, metrics=metrics)
    return env.service


def manifest(detectors, obs_start: datetime | None = None) -> ExposureManifest:
    start = obs_start or datetime.now(UTC)
    return ExposureManifest("LSSTComCam", E, 20261122, list(detectors), start, 15.0, "r", start)


def upload(env, detector: int, late_by: float = 1.0) -> DataId:
    did = DataId("LSSTComCam", E, detector)
    readout = datetime.now(UTC) - timedelta(seconds=late_by)
    DirectUploader(env.store).send(did, small_ccd(E, detector), readout)
    return did


def ingested(env) -> list[ExposureIngested]:
    return [ExposureIngested.decode(m.data) for m in env.bus.topics.get("exposures-ingested", [])]


def count(metrics: Metrics, status: str) -> float:
    return metrics.registry.get_sample_value(COUNTED, {"instrument": "LSSTComCam", "status": status}) or 0.0


def gauge(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"instrument": "LSSTComCam"})


def push(data: bytes, message_id: str = "m1") -> dict:
    return {"message": {"data": base64.b64encode(data).decode(), "messageId": message_id}}


def redeliver(env, did: DataId):
    event = storage_cloudevent(env.store.stat(did.object_name()))
    return env.service.handle(from_storage_cloudevent(event, event["data"]))


def facility(env, **overrides):
    settings = ReconcileSettings(grace=0.0, canary=False, **overrides)
    return build_facility(env.service, BusSettings(), settings, RedriveSettings(enabled=False))


def test_the_last_ccd_publishes_one_exposures_ingested_and_counts_the_exposure(env, service, metrics):
    record_manifest(env.registry, manifest([0, 1, 2]))
    upload(env, 0)
    upload(env, 1, late_by=2.0)
    env.deliver_all()
    assert ingested(env) == []  # not complete yet
    last = upload(env, 2)
    env.deliver_all()
    [event] = ingested(env)
    assert (event.instrument, event.exposure, event.status) == ("LSSTComCam", E, "ok")
    assert (event.expected, event.registered, event.missing_detectors) == (3, 3, [])
    [message] = env.bus.topics["exposures-ingested"]
    assert message.key == f"LSSTComCam/{E}" and message.attributes["status"] == "ok"
    assert count(metrics, "ok") == 1 and count(metrics, "over_budget") == 0
    assert gauge(metrics, "obsingest_last_exposure_missing_ccds") == 0
    assert gauge(metrics, "obsingest_last_exposure_max_latency_seconds") == event.latency_max
    # a redelivered notification of the last CCD: its ArrivalEvent again, not the exposure's
    assert redeliver(env, last).status == "duplicate"
    assert len(ingested(env)) == 1 and count(metrics, "ok") == 1
    assert env.registry.outbox.status().pending == 0


def test_an_exposure_with_a_late_ccd_is_over_budget(env, service, metrics):
    record_manifest(env.registry, manifest([0, 1]))
    upload(env, 0)
    upload(env, 1, late_by=9.0)
    env.deliver_all()
    [event] = ingested(env)
    assert event.status == "over_budget" and event.over_budget == [1]
    assert count(metrics, "over_budget") == 1 and count(metrics, "ok") == 0


def test_a_manifest_recorded_after_its_ccds_completes_the_exposure(env, service, metrics):
    for det in range(3):
        upload(env, det)
    env.deliver_all()
    assert ingested(env) == []  # no manifest: the expected set is not guessed
    data = manifest([0, 1, 2]).encode()
    reply, status = handle_push(push(data), env.registry, service.closer.close)
    assert status == 200 and reply.startswith("recorded")
    assert len(ingested(env)) == 1 and count(metrics, "ok") == 1
    reply, status = handle_push(push(data, "m2"), env.registry, service.closer.close)
    assert status == 200 and reply.startswith("duplicate")
    assert len(ingested(env)) == 1 and count(metrics, "ok") == 1


def test_an_event_the_bus_refused_is_published_by_a_drain_stamped_then(env, service, monkeypatch):
    record_manifest(env.registry, manifest([0, 1]))
    upload(env, 0)
    upload(env, 1)
    with BusDown(env, monkeypatch):
        env.deliver_all()
    assert ingested(env) == [] and env.registry.outbox.status().pending == 3
    result = service.announcer.drain()
    assert (result.published, result.failed) == (3, 0)
    [event] = ingested(env)
    assert event.published_time > event.last_registered
    assert len(env.bus.topics["ccd-arrivals"]) == 2
    assert service.announcer.drain().published == 0


def test_a_process_killed_between_commit_and_check_is_covered_by_the_sweep(
    env, service, metrics, monkeypatch
):
    record_manifest(env.registry, manifest([0, 1]))
    upload(env, 0)
    upload(env, 1)
    monkeypatch.setattr(service.closer, "close_quietly", lambda *a: None)  # died after commit
    env.deliver_all()
    assert ingested(env) == [] and count(metrics, "ok") == 0
    back_office = facility(env)
    report = back_office.run_pass()
    assert (report.ingested, report.incomplete, report.errors) == (1, 0, [])
    assert len(ingested(env)) == 1 and count(metrics, "ok") == 1
    assert back_office.snapshot()["exposures_ingested"] == 1
    assert back_office.run_pass().ingested == 0 and len(ingested(env)) == 1


def test_an_exposure_incomplete_at_its_deadline_is_counted_once_across_restarts(env, service, metrics):
    record_manifest(env.registry, manifest([0, 1, 2], datetime.now(UTC) - timedelta(minutes=2)))
    upload(env, 0)
    env.deliver_all()
    report = facility(env).run_pass()
    assert (report.ingested, report.incomplete) == (0, 1)
    assert count(metrics, "incomplete") == 1
    assert gauge(metrics, "obsingest_last_exposure_missing_ccds") == 2
    assert facility(env).run_pass().incomplete == 0  # a restarted service: not again
    assert count(metrics, "incomplete") == 1
    # the missing CCDs arrive late: downstream gets its event; the exposure stays counted once
    upload(env, 1, late_by=130.0)
    upload(env, 2, late_by=130.0)
    env.deliver_all()
    [event] = ingested(env)
    assert event.status == "over_budget" and event.missing_detectors == []
    assert count(metrics, "incomplete") == 1 and count(metrics, "over_budget") == 0


def test_an_exposure_before_its_deadline_is_left_open(env, service, metrics):
    record_manifest(env.registry, manifest([0, 1, 2]))  # shutter opened just now
    upload(env, 0)
    env.deliver_all()
    report = facility(env).run_pass()
    assert (report.ingested, report.incomplete) == (0, 0)
    assert count(metrics, "incomplete") == 0


def test_the_sweep_can_be_switched_off(env, service):
    assert facility(env, exposures=False).closer is None
    assert facility(env, exposure_grace=10.0).closer.allowance == 15.0
