"""Announcing through the outbox: immediate publish, drain after a bus outage, the canary path."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from functions.register.announce import PeriodicDrain
from obsingest.dataid import DataId
from obsingest.errors import RetriableError
from obsingest.store.notifications import from_storage_cloudevent, storage_cloudevent
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd

pytestmark = pytest.mark.unit

READOUT = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)


def upload(env, detector: int) -> DataId:
    did = DataId("LSSTComCam", 2026112200001, detector)
    DirectUploader(env.store).send(did, small_ccd(did.exposure, detector), READOUT)
    return did


class BusDown:
    """The arrivals topic is gone: every publish fails, as PubSubPublisher's PublishFailed."""

    def __init__(self, env, monkeypatch):
        self.env, self.monkeypatch = env, monkeypatch
        self.original = env.bus.publish

    def __enter__(self):
        def down(*args, **kwargs):
            raise RetriableError("publish to projects/p/topics/ccd-arrivals: 404 topic not found")

        self.monkeypatch.setattr(self.env.bus, "publish", down)
        return self

    def __exit__(self, *exc):
        self.monkeypatch.setattr(self.env.bus, "publish", self.original)


def test_happy_path_publishes_once_and_marks_the_row(env):
    upload(env, 1)
    [outcome] = env.deliver_all()
    assert outcome.status == "registered" and outcome.message == ""
    status = env.registry.outbox.status()
    assert (status.pending, status.published) == (0, 1)
    assert env.service.announcer.drain().published == 0
    assert len(env.arrivals()) == 1


def test_everything_registered_during_a_bus_outage_is_announced_by_a_later_drain(env, monkeypatch):
    for detector in range(4):
        upload(env, detector)
    with BusDown(env, monkeypatch):
        outcomes = env.deliver_all()
        assert {o.status for o in outcomes} == {"registered"}  # acked: the outbox owns them
        assert env.service.announcer.drain().failed == 1  # stops at the first failure
    assert env.arrivals() == [] and env.registry.outbox.status().pending == 4
    result = env.service.announcer.drain()
    assert (result.published, result.failed) == (4, 0)
    arrivals = env.arrivals()
    assert sorted(a.detector for a in arrivals) == [0, 1, 2, 3]
    # each is stamped when it was actually published: its latency is the real one
    assert all(a.published_time > a.registered_time for a in arrivals)
    assert env.registry.outbox.status().pending == 0
    assert env.service.announcer.drain().published == 0  # never twice


def test_the_function_drains_on_its_next_invocation(env, monkeypatch):
    upload(env, 1)
    with BusDown(env, monkeypatch):
        env.deliver_all()
    env.service._drain = PeriodicDrain(env.service.announcer, every=0.0)
    env.service.announcer.failed_at = float("-inf")  # the outage was long ago
    upload(env, 2)
    env.deliver_all()  # detector 2's invocation also announces detector 1
    assert sorted(a.detector for a in env.arrivals()) == [1, 2]


def test_a_drain_skips_while_the_bus_was_just_down(env, monkeypatch):
    upload(env, 1)
    with BusDown(env, monkeypatch):
        env.deliver_all()
    drain = PeriodicDrain(env.service.announcer, every=60.0)
    assert drain.maybe_drain() is None  # the failure was a moment ago: not hammered
    env.service.announcer.failed_at -= 120
    assert drain.maybe_drain().published == 1
    assert drain.maybe_drain() is None  # once per interval


def test_the_canary_is_recorded_as_seen_and_never_becomes_a_dataset(env):
    env.registry.audit.canary_written("canary/20261122T030000-abc", READOUT)
    env.store.put("canary/20261122T030000-abc", b"canary")
    [outcome] = env.deliver_all()
    assert outcome.status == "canary"
    [row] = env.registry.audit.canaries(since=READOUT - timedelta(hours=1))
    assert row.seen_at is not None
    assert env.registry.count_datasets() == 0 and env.registry.quarantined() == []
    assert env.arrivals() == []


def test_a_redelivery_of_a_dataset_announced_before_the_outbox_existed_still_fails_loudly(env, monkeypatch):
    did = upload(env, 3)
    env.deliver_all()
    from sqlalchemy import delete

    from obsingest.registry.facility_tables import arrival_outbox

    with env.registry.engine.begin() as conn:  # as registered before migration 3
        conn.execute(delete(arrival_outbox))
    event = storage_cloudevent(env.store.stat(did.object_name()))
    with BusDown(env, monkeypatch), pytest.raises(RetriableError):
        env.service.handle(from_storage_cloudevent(event, event["data"]))


def _pending(env, key, message):
    """An outbox row as any writer leaves it, its lease already expired (drains take it)."""
    import uuid

    from obsingest.registry.outbox import insert_row

    with env.registry.engine.begin() as conn:
        insert_row(conn, uuid.uuid5(uuid.NAMESPACE_URL, key), message, READOUT, 0.0)


def test_the_drain_publishes_each_contract_by_its_own_rule(env):
    """ArrivalEvent and ExposureIngested rows are re-stamped when sent; a body of any other
    contract, or not Avro at all, is published exactly as it was written."""
    from obsingest.messages import ArrivalEvent, ExposureIngested, ExposureManifest
    from obsingest.registry import OutboxMessage
    from obsingest.registry.ingested import event_id, ingested_attributes

    upload(env, 1)
    with pytest.MonkeyPatch.context() as mp, BusDown(env, mp):
        env.deliver_all()  # the arrival stays pending
    ingested = ExposureIngested(
        event_id("LSSTComCam", 2026112200001),
        "LSSTComCam",
        2026112200001,
        20261122,
        "raw",
        "LSSTComCam/raw/all",
        1,
        1,
        [1],
        [],
        [],
        READOUT,
        5.0,
        "ok",
        True,
        READOUT,
    )
    manifest = ExposureManifest("LSSTComCam", 2026112200001, 20261122, [1], READOUT, 15.0, "r", READOUT)
    bodies = {"ingested": ingested.encode(), "manifest": manifest.encode(), "opaque": b"not avro at all"}
    for name, body in bodies.items():
        attributes = ingested_attributes(ingested) if name == "ingested" else {"k": name}
        _pending(env, name, OutboxMessage(f"topic-{name}", body, key=name, attributes=attributes))
    env.service.announcer.failed_at = float("-inf")
    result = env.service.announcer.drain()
    assert (result.published, result.failed) == (4, 0)
    [arrival] = env.arrivals()
    assert arrival.published_time > arrival.registered_time and arrival.detector == 1
    [sent] = env.bus.topics["topic-ingested"]
    restamped = ExposureIngested.decode(sent.data)
    assert restamped.published_time > READOUT
    assert restamped == dataclasses.replace(ingested, published_time=restamped.published_time)
    assert sent.key == "ingested" and sent.attributes["schema"] == "ExposureIngested"
    assert [m.data for m in env.bus.topics["topic-manifest"]] == [bodies["manifest"]]
    assert [m.data for m in env.bus.topics["topic-opaque"]] == [b"not avro at all"]
    assert env.bus.topics["topic-opaque"][0].attributes == {"k": "opaque"}
    assert env.registry.outbox.status().pending == 0
    assert isinstance(ArrivalEvent.decode(env.bus.topics["ccd-arrivals"][0].data), ArrivalEvent)


def test_a_failed_publish_of_another_contract_keeps_its_row_with_the_reason(env, monkeypatch):
    from obsingest.registry import OutboxMessage

    _pending(env, "opaque", OutboxMessage("topic-opaque", b"bytes", key="k"))
    with BusDown(env, monkeypatch):
        assert env.service.announcer.drain().failed == 1
    import uuid

    row = env.registry.outbox.row(uuid.uuid5(uuid.NAMESPACE_URL, "opaque"))
    assert row["published_at"] is None and "404 topic not found" in row["last_error"]
    assert row["attempts"] == 1
    env.service.announcer.failed_at = float("-inf")
    assert env.service.announcer.drain().published == 1
    assert [m.data for m in env.bus.topics["topic-opaque"]] == [b"bytes"]


def _arrival(registered: datetime):
    import uuid

    from obsingest.messages import ArrivalEvent

    return ArrivalEvent(
        dataset_id=uuid.UUID(int=7),
        dataset_type="raw",
        run="LSSTCam/raw/all",
        instrument="LSSTCam",
        exposure=2026112200001,
        detector=94,
        day_obs=20261122,
        uri="gs://raw/LSSTCam/x.fits",
        size=12_345_678,
        checksum="crc32c:0badcafe",
        transport="direct",
        readout_time=READOUT,
        registered_time=registered,
        published_time=registered,
        stored_time=READOUT + timedelta(seconds=1),
    )


def test_the_published_body_carries_the_stamp_the_service_reports(env):
    upload(env, 2)
    [outcome] = env.deliver_all()
    [received] = env.arrivals()
    assert received == outcome.arrival
    assert received.published_time > received.registered_time


def test_a_row_that_always_fails_does_not_hold_back_the_rows_behind_it(env, monkeypatch):
    """A row addressed to a topic that is gone for good (renamed in settings, never created)
    failed at every drain; drains take the oldest first and stop at a failure, so every row
    behind it stayed unannounced for ever. Rows that failed more often now go last."""
    from obsingest.registry import OutboxMessage

    _pending(env, "poison", OutboxMessage("gone-topic", b"bytes", key="k"))
    for detector in (1, 2):
        upload(env, detector)
    with BusDown(env, monkeypatch):
        env.deliver_all()  # both arrivals stay pending, behind the poison row
    original = env.bus.publish

    def gone(topic, *args, **kwargs):
        if topic == "gone-topic":
            raise RetriableError("publish to projects/p/topics/gone-topic: 404 topic not found")
        return original(topic, *args, **kwargs)

    monkeypatch.setattr(env.bus, "publish", gone)
    env.registry.outbox.release([1, 2, 3], retry_after=0)  # the writers' leases are over
    for _ in range(3):  # drains as the facility runs them, pass after pass
        env.service.announcer.drain()
    assert sorted(a.detector for a in env.arrivals()) == [1, 2]
    assert env.registry.outbox.status().pending == 1  # the poison row only, with its reason
