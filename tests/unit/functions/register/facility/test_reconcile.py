"""Reconcile on the embedded stores: lost notifications, bad objects, gone objects, dry run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from functions.register.facility.listing import list_objects
from functions.register.facility.reconcile import Reconciler
from obsingest.dataid import DataId
from obsingest.messages import utcnow
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd

pytestmark = pytest.mark.unit

READOUT = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)
SINCE = datetime(2000, 1, 1, tzinfo=UTC)


def upload(env, detector: int) -> DataId:
    did = DataId("LSSTComCam", 2026112200001, detector)
    DirectUploader(env.store).send(did, small_ccd(did.exposure, detector), READOUT)
    return did


def lose_notifications(env) -> None:
    outbox = env.store.outbox()
    for path, _ in outbox.pending():
        outbox.ack(path)


@pytest.fixture
def reconciler(env):
    return Reconciler(env.service, ("raw/", "quarantine/"), grace=0.0)


def test_objects_whose_notification_was_lost_are_registered_and_announced(env, reconciler):
    for detector in range(3):
        upload(env, detector)
    env.deliver_all()  # these three made it
    for detector in range(3, 9):
        upload(env, detector)
    lose_notifications(env)
    report = reconciler.run(SINCE)
    assert (report.listed, report.known, report.missing) == (9, 3, 6)
    assert report.outcomes == {"registered": 6} and report.consistent
    assert env.registry.count_datasets() == 9
    assert sorted(a.detector for a in env.arrivals()) == list(range(9))
    again = reconciler.run(SINCE)  # idempotent: nothing left to do
    assert (again.missing, again.outcomes) == (0, {})


def test_bad_objects_are_quarantined_once_with_their_reason(env, reconciler):
    env.store.put("raw/LSSTComCam/20261122/2026112200001/garbage.fits.fz", b"not fits")
    lose_notifications(env)
    report = reconciler.run(SINCE)
    assert report.outcomes == {"quarantined": 1}
    [row] = env.registry.quarantined()
    assert row["reason"] == "corrupt-file"  # any name is taken: the bytes are what is wrong
    assert reconciler.run(SINCE).missing == 0  # the quarantine record counts as known


def test_young_objects_and_objects_outside_the_window_are_left_alone(env):
    upload(env, 1)
    lose_notifications(env)
    assert Reconciler(env.service, ("raw/",), grace=3600).run(SINCE).listed == 0
    future = utcnow() + timedelta(hours=1)
    assert Reconciler(env.service, ("raw/",), grace=0).run(future).listed == 0


def test_registered_objects_that_are_gone_are_reported(env, reconciler):
    did = upload(env, 4)
    env.deliver_all()
    env.store.delete(did.object_name())
    report = reconciler.run(SINCE)
    assert report.gone == [env.store.uri(did.object_name())] and not report.consistent


def test_dry_run_reports_without_registering(env, reconciler):
    upload(env, 5)
    lose_notifications(env)
    report = reconciler.run(SINCE, dry_run=True)
    assert report.missing == 1 and report.outcomes == {} and not report.consistent
    assert env.registry.count_datasets() == 0


def test_local_listing_skips_the_stores_own_bookkeeping(env):
    upload(env, 6)
    names = [o.name for o in list_objects(env.store, "")]
    assert names == [DataId("LSSTComCam", 2026112200001, 6).object_name()]
    assert list_objects(env.store, "raw/LSSTComCam/20261122/") != []
    assert list_objects(env.store, "nothing/") == []
