"""Reconcile on the embedded stores: lost notifications, bad objects, gone objects, dry run."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from functions.register.facility import listing, reconcile
from functions.register.facility.listing import list_objects
from functions.register.facility.reconcile import Reconciler
from obsingest.dataid import DataId
from obsingest.messages import utcnow
from obsingest.store.base import StoredObject
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


class NightsBucket:
    """A bucket of ten nights of ``PER_NIGHT`` objects each, listed through ``listing``'s two
    primitives; counts the objects the listings hand back."""

    PER_NIGHT = 300

    def __init__(self, now: datetime) -> None:
        self.objects = []
        for night in range(10):  # only the last night is inside a 6 h window
            day = now - timedelta(days=9 - night, hours=2)
            for i in range(self.PER_NIGHT):
                name = f"raw/LSSTCam/{day:%Y%m%d}/MC_O_{day:%Y%m%d}_{i // 189:06d}/x_{i % 189:03d}.fits"
                self.objects.append(StoredObject("b", name, 1, "", "", 1, day + timedelta(seconds=i)))
        self.objects.sort(key=lambda o: o.name)
        self.returned = 0

    def iter_objects(self, _store, prefix: str, start_offset: str = ""):
        out = [o for o in self.objects if o.name.startswith(prefix) and o.name >= start_offset]
        self.returned += len(out)
        return iter(out)

    def children(self, _store, prefix: str):
        below = {o.name[len(prefix) :] for o in self.objects if o.name.startswith(prefix)}
        objects = [
            o for o in self.objects if o.name[len(prefix) :] in below and "/" not in o.name[len(prefix) :]
        ]
        self.returned += len(objects)
        return objects, sorted({f"{prefix}{rest.split('/')[0]}/" for rest in below if "/" in rest})


@pytest.fixture
def nights(monkeypatch):
    now = datetime(2025, 5, 1, 12, tzinfo=UTC)
    bucket = NightsBucket(now)
    monkeypatch.setattr(listing, "iter_objects", bucket.iter_objects, raising=False)
    monkeypatch.setattr(listing, "children", bucket.children, raising=False)
    monkeypatch.setattr(reconcile, "list_objects", lambda *args: list(bucket.iter_objects(*args)))
    stored: list[dict] = []  # the registry's rows of the window
    audit = SimpleNamespace(
        registered_uris=lambda listed: set(listed),
        quarantined_uris=lambda listed: set(),
        stored_between=lambda since, until, uri_prefix: stored,
    )
    store = SimpleNamespace(uri=lambda name: f"gs://b/{name}", stat=lambda name: None)  # nothing gone
    service = SimpleNamespace(store=store, registry=SimpleNamespace(audit=audit))
    reconciler = Reconciler(service, ("raw/",), grace=0.0, clock=lambda: now)
    return SimpleNamespace(
        bucket=bucket, reconciler=reconciler, since=now - timedelta(hours=6), stored=stored
    )


def test_the_full_sweep_lists_only_the_nights_its_window_can_hold(nights):
    report = nights.reconciler.run(nights.since, every_night=False)
    assert report.listed == NightsBucket.PER_NIGHT  # the window: one night
    # that night and the one before (day_obs is the date at UTC-12h), not the ten stored
    assert nights.bucket.returned <= 2 * NightsBucket.PER_NIGHT
    assert report.watermarks["raw/LSSTCam/"] == max(o.name for o in nights.bucket.objects)


def test_the_full_sweep_lists_an_old_night_sent_late_or_every_night_when_widened(nights):
    old = nights.bucket.objects[0]  # the first night's: sent late, created in the window
    nights.bucket.objects[0] = replace(old, time_created=nights.since + timedelta(minutes=1))
    assert (
        nights.reconciler.run(nights.since, every_night=False).listed == NightsBucket.PER_NIGHT
    )  # no sign of it
    nights.stored.append({"uri": f"gs://b/{nights.bucket.objects[1].name}"})  # a sibling registered
    assert nights.reconciler.run(nights.since, every_night=False).listed == NightsBucket.PER_NIGHT + 1
    nights.stored.clear()  # notifications down: the facility widens the window
    assert nights.reconciler.run(nights.since).listed == NightsBucket.PER_NIGHT + 1


def test_local_listing_of_nights_walks_down_to_the_night_and_skips_the_unwanted(env):
    upload(env, 7)
    everything = [o.name for o in list_objects(env.store, "raw/")]
    assert [
        o.name for o in listing.list_nights(env.store, "raw/", lambda night: night == 20261122)
    ] == everything
    assert list(listing.list_nights(env.store, "raw/", lambda night: False)) == []
    assert [
        o.name for o in listing.list_nights(env.store, "raw/LSSTComCam/20261122/", lambda n: False)
    ] == everything


def test_the_daily_every_night_sweep_reaches_back_to_the_last_for_late_ccds_of_old_nights(nights):
    """An old night's CCD sent late, created between two daily sweeps but outside any routine
    window that lists its night (none does), its notification lost, no sibling registered."""
    old = nights.bucket.objects[0]
    nights.bucket.objects[0] = replace(old, time_created=nights.since - timedelta(hours=10))
    assert nights.reconciler.run(nights.since, every_night=False).listed == NightsBucket.PER_NIGHT
    assert nights.reconciler.run(nights.since).listed == NightsBucket.PER_NIGHT  # outside the window
    late_since = nights.since - timedelta(hours=24)  # the last daily sweep's window start
    report = nights.reconciler.run(nights.since, late_since=late_since)
    assert report.listed == NightsBucket.PER_NIGHT + 1


def test_a_store_that_cannot_be_listed_is_listing_failed_a_retriable_error(env, monkeypatch):
    def broken(*_args):
        raise OSError("disk gone")

    monkeypatch.setattr(listing, "_list_local", broken)
    monkeypatch.setattr(listing, "_children_local", broken)
    for attempt in (lambda: list_objects(env.store, "raw/"), lambda: listing.children(env.store, "raw/")):
        with pytest.raises(listing.ListingFailed, match="disk gone") as info:
            attempt()
        assert info.value.retriable
