"""The incremental reconcile: the watermark logic alone, listing from a name on the local store,
and incremental passes on the embedded stores (what they list, what they ask the registry)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from functions.register.facility.listing import below, lane_of, lanes, list_objects
from functions.register.facility.reconcile import Reconciler
from functions.register.facility.watermark import PrefixTail
from obsingest.dataid import DataId
from obsingest.store.base import StoredObject
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, 3, 0, 0, tzinfo=UTC)
SINCE = NOW - timedelta(hours=6)


def obj(name: str, age: float) -> StoredObject:
    """An object named ``name`` created ``age`` seconds before NOW."""
    return StoredObject("b", name, 1, "", "", 1, NOW - timedelta(seconds=age))


def night(exposures: int, per: int = 3, every: float = 17.0) -> list[StoredObject]:
    """``exposures`` exposures of ``per`` CCDs, the last one written just now, in name order."""
    return [
        obj(f"raw/C/20261122/{e:05d}/{d:03d}", (exposures - 1 - e) * every)
        for e in range(exposures)
        for d in range(per)
    ]


# the watermark ---------------------------------------------------------------------------------
def test_the_watermark_rises_to_the_oldest_recent_exposure_and_forgets_what_is_below():
    tail = PrefixTail("raw/", lag=60.0)
    listed = night(20)
    start = tail.advance(listed, [o.name for o in listed], NOW, SINCE)
    # exposures 16..19 were created within the last 60 s (51, 34, 17, 0 s ago)
    assert start == "raw/C/20261122/00016/000"
    assert tail.settled == {o.name for o in listed if o.name >= start}
    assert len(tail.settled) == 4 * 3  # bounded by the recent objects, not the night


def test_only_unsettled_objects_in_the_window_are_checked():
    tail = PrefixTail("raw/", lag=60.0)
    listed = night(3)
    tail.advance(listed[:3], [o.name for o in listed[:3]], NOW, SINCE)
    young = obj("raw/C/20261122/00099/000", 1)
    old = obj("raw/C/20261122/00098/000", 7 * 3600)
    unchecked = tail.unchecked([*listed, young, old], SINCE, NOW - timedelta(seconds=15))
    # exposure 0 settled, exposure 2 (0 s old) and ``young`` within the grace, ``old`` outside
    assert [o.name for o in unchecked] == [o.name for o in listed[3:6]]


def test_an_unsettled_object_holds_the_watermark_until_its_hold_expires():
    tail = PrefixTail("raw/", lag=60.0, hold=600.0)
    listed = night(20)
    failed = listed[6]  # exposure 2, 289 s old: its registration failed
    settled = [o.name for o in listed if o is not failed]
    assert tail.advance(listed, settled, NOW, SINCE) == failed.name
    assert failed.name not in tail.settled
    later = NOW + timedelta(seconds=400)  # 689 s old now: left to the full sweep
    assert tail.advance(listed, [], later, SINCE) == listed[-1].name


def test_objects_outside_the_window_never_hold_the_watermark():
    tail = PrefixTail("raw/", lag=60.0, hold=10 * 3600.0)
    ancient = obj("raw/C/20261121/00001/000", 7 * 3600)
    listed = [ancient, *night(20)]
    start = tail.advance(listed, [o.name for o in listed[1:]], NOW, SINCE)
    assert start == "raw/C/20261122/00016/000"


def test_with_nothing_recent_the_watermark_keeps_the_last_name_and_never_moves_down():
    tail = PrefixTail("raw/", lag=60.0)
    listed = night(5, every=100.0)  # the last exposure 0 s old, the others >= 100 s
    quiet = NOW + timedelta(seconds=3600)
    assert tail.advance(listed, [o.name for o in listed], quiet, SINCE) == listed[-1].name
    assert tail.settled == {listed[-1].name}
    assert tail.advance([], [], quiet, SINCE) == listed[-1].name
    # a listing that somehow went lower (a racing sweep) does not pull it back
    assert tail.advance(listed[:3], [], quiet, SINCE) == listed[-1].name


def test_directories_below_the_offset_are_skipped_whole():
    assert below("raw/C/20261121/", "raw/C/20261122/00001/x")
    assert not below("raw/C/20261122/", "raw/C/20261122/00001/x")  # the offset continues it
    assert not below("raw/C/20261122/00002/", "raw/C/20261122/00001/x")
    assert not below("raw/", "raw/C")


# listing from a name -----------------------------------------------------------------------
def test_the_local_listing_from_a_name_returns_exactly_the_names_from_it(env):
    for exposure in (2026112100007, 2026112200001, 2026112200002):
        for detector in (0, 4, 8):
            env.store.put(DataId("LSSTComCam", exposure, detector).object_name(), b"x")
    everything = [o.name for o in list_objects(env.store, "raw/")]
    assert len(everything) == 9
    for offset in ["", *everything, everything[4] + "0", "raw/LSSTComCam/20261122/", "zzz"]:
        names = [o.name for o in list_objects(env.store, "raw/", start_offset=offset)]
        assert sorted(names) == sorted(n for n in everything if n >= offset), offset


# incremental passes --------------------------------------------------------------------------
def upload(env, exposure: int, detectors: range) -> None:
    for detector in detectors:
        did = DataId("LSSTComCam", exposure, detector)
        DirectUploader(env.store).send(did, small_ccd(exposure, detector), NOW)


def lose_notifications(env) -> None:
    outbox = env.store.outbox()
    for path, _ in outbox.pending():
        outbox.ack(path)


class Clock:
    """A clock the test moves: ``lag`` is measured against it, not the wall clock."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def test_incremental_passes_list_from_the_watermark_and_ask_only_about_what_is_new(env):
    clock = Clock()
    reconciler = Reconciler(env.service, ("raw/",), grace=0.0, lag=60.0, clock=clock)
    since = clock.now - timedelta(hours=1)
    for exposure in (2026112200001, 2026112200002, 2026112200003):
        upload(env, exposure, range(9))
    env.deliver_all()
    clock.now += timedelta(seconds=120)  # those three exposures are past the lag
    sweep = reconciler.run(since)
    assert (sweep.mode, sweep.listed, sweep.known, sweep.missing) == ("full", 27, 27, 0)
    asked: list[str] = []
    audit = env.service.registry.audit
    registered_uris = audit.registered_uris

    def spy(uris):
        asked.extend(uris)
        return registered_uris(uris)

    audit.registered_uris = spy
    upload(env, 2026112200004, range(9))
    env.deliver_all()
    upload(env, 2026112200005, range(9))
    lose_notifications(env)  # exposure 5's notifications are lost
    clock.now += timedelta(seconds=1)
    report = reconciler.run_new(since)
    assert report.mode == "incremental"
    # listed from the watermark (the last name of exposure 3) and asked about the new 18 only
    assert (report.listed, report.known, report.missing) == (19, 9, 9)
    assert len(asked) == 18 and all("20261122_000003" not in uri for uri in asked)
    assert report.outcomes == {"registered": 9} and report.consistent
    assert env.registry.count_datasets() == 45
    asked.clear()
    again = reconciler.run_new(since)  # settled names are not asked about again
    assert (again.missing, asked) == (0, [])
    clock.now += timedelta(seconds=120)
    reconciler.run_new(since)
    assert reconciler.tails["raw/LSSTComCam/"].start.endswith("CC_O_20261122_000005_R22_S22.fits")
    assert len(reconciler.tails["raw/LSSTComCam/"].settled) == 1


def test_a_failed_registration_is_tried_again_by_the_next_incremental_pass(env, monkeypatch):
    from obsingest.errors import RetriableError

    clock = Clock()
    reconciler = Reconciler(env.service, ("raw/",), grace=0.0, lag=0.0, clock=clock)
    since = clock.now - timedelta(hours=1)
    reconciler.run(since)
    upload(env, 2026112200001, range(3))
    lose_notifications(env)
    handle = env.service.handle

    def down(event):
        raise RetriableError("registry down")

    monkeypatch.setattr(env.service, "handle", down)
    clock.now += timedelta(seconds=5)
    failed = reconciler.run_new(since)
    assert (failed.missing, failed.failed) == (3, 3) and not failed.consistent
    monkeypatch.setattr(env.service, "handle", handle)
    clock.now += timedelta(seconds=30)  # past the lag: only the failure holds the watermark
    retried = reconciler.run_new(since)
    assert retried.outcomes == {"registered": 3} and retried.consistent
    assert env.registry.count_datasets() == 3


def test_the_service_sweeps_the_window_first_then_rarely_and_after_an_outage(env):
    from functions.register.facility.settings import ReconcileSettings, RedriveSettings
    from functions.register.facility.wiring import build_facility
    from obsingest.settings import BusSettings

    settings = ReconcileSettings(grace=0.0, canary=False, full_every=3600.0)
    service = build_facility(env.service, BusSettings(), settings, RedriveSettings(enabled=False))
    modes = [service.run_pass().reconcile.mode for _ in range(3)]
    assert modes == ["full", "incremental", "incremental"]
    service._last_full -= 3600.0  # the sweep's schedule comes round
    assert service.run_pass().reconcile.mode == "full"
    assert service.run_pass().reconcile.mode == "incremental"
    service._resume_from = datetime.now(UTC) - timedelta(days=1)  # a window reaching back
    service._resume_known = True
    assert service.run_pass().reconcile.mode == "full"
    assert service._resume_from is None  # that sweep completed: back to incremental passes
    assert service.run_pass().reconcile.mode == "incremental"
    stats = service.snapshot()
    assert (stats["full_sweeps"], stats["incremental_passes"]) == (3, 4)


def test_objects_within_a_long_grace_hold_the_watermark_until_they_are_checked(env):
    clock = Clock()
    reconciler = Reconciler(env.service, ("raw/",), grace=3600.0, lag=60.0, hold=600.0, clock=clock)
    since = clock.now - timedelta(hours=2)
    upload(env, 2026112200001, range(2))
    lose_notifications(env)
    clock.now += timedelta(seconds=1800)  # past lag and hold, not yet past the grace
    assert reconciler.run_new(since).missing == 0
    first = DataId("LSSTComCam", 2026112200001, 0).object_name()
    assert reconciler.tails["raw/LSSTComCam/"].start == first  # held at the unchecked objects
    clock.now += timedelta(seconds=1801)
    report = reconciler.run_new(since)
    assert report.outcomes == {"registered": 2}


def send(env, instrument: str, exposure: int, detectors: range) -> None:
    for detector in detectors:
        did = DataId(instrument, exposure, detector)
        DirectUploader(env.store).send(did, small_ccd(exposure, detector, instrument), NOW)


def test_each_instrument_keeps_its_own_watermark_so_a_lost_ccd_of_either_is_registered(env, monkeypatch):
    # names sort by instrument first: raw/LATISS/... < raw/LSSTCam/...; one watermark for raw/
    # held by LSSTCam's open exposure rose past every LATISS name, so a new LATISS CCD whose
    # notification was lost waited for the full sweep (30 min), not the next pass
    from obsingest.store import local

    clock = Clock()

    class StoreTime(datetime):  # the store stamps objects with the test's clock
        @classmethod
        def now(cls, tz=None):
            return clock.now

    monkeypatch.setattr(local, "datetime", StoreTime)
    reconciler = Reconciler(env.service, ("raw/", "quarantine/"), grace=15.0, lag=60.0, clock=clock)
    since = clock.now - timedelta(hours=1)
    send(env, "LATISS", 2026112200001, range(1))
    send(env, "LSSTCam", 2026112200001, range(3))
    env.deliver_all()
    clock.now += timedelta(seconds=120)
    assert reconciler.run(since).missing == 0
    send(env, "LSSTCam", 2026112200002, range(3))  # LSSTCam keeps arriving: open for 60 s
    env.deliver_all()
    clock.now += timedelta(seconds=16)
    assert reconciler.run_new(since).missing == 0
    send(env, "LATISS", 2026112200002, range(1))
    lose_notifications(env)  # the new LATISS CCD's notification is lost
    clock.now += timedelta(seconds=16)  # past the grace
    report = reconciler.run_new(since)
    assert report.outcomes == {"registered": 1} and report.consistent
    assert env.registry.count_datasets() == 8
    # each from its own watermark: LATISS's last settled name and the new one, LSSTCam's open 3
    assert report.listed == 2 + 3
    assert set(report.watermarks) == {"raw/LATISS/", "raw/LSSTCam/"}
    assert report.watermarks["raw/LSSTCam/"].startswith("raw/LSSTCam/20261122/MC_O_20261122_000002/")


def test_lanes_are_the_instrument_prefixes_of_raw_and_of_the_quarantine(env):
    send(env, "LATISS", 2026112200001, range(1))
    send(env, "LSSTCam", 2026112200001, range(1))
    parked = f"quarantine/{DataId('LATISS', 2026112200001, 0).object_name()}/sha256-ab.fits.fz"
    env.store.put(parked, b"x")
    env.store.put("raw/stray.fits", b"x")  # outside the layout: checked on every pass
    loose, raw_lanes = lanes(env.store, "raw/")
    assert ([o.name for o in loose], raw_lanes) == (["raw/stray.fits"], ["raw/LATISS/", "raw/LSSTCam/"])
    assert lanes(env.store, "quarantine/") == ([], ["quarantine/raw/LATISS/"])
    assert lanes(env.store, "raw/LSSTCam/") == ([], ["raw/LSSTCam/"])  # at an instrument: one lane
    found = {o.name: lane_of(p, o.name) for p in ("raw/", "quarantine/") for o in list_objects(env.store, p)}
    assert found == {
        DataId("LATISS", 2026112200001, 0).object_name(): "raw/LATISS/",
        DataId("LSSTCam", 2026112200001, 0).object_name(): "raw/LSSTCam/",
        parked: "quarantine/raw/LATISS/",
        "raw/stray.fits": None,
    }


def test_a_new_instrument_and_a_stray_object_are_reconciled_by_the_next_incremental_pass(env):
    clock = Clock()
    reconciler = Reconciler(env.service, ("raw/", "quarantine/"), grace=0.0, lag=60.0, clock=clock)
    since = clock.now - timedelta(hours=1)
    send(env, "LSSTCam", 2026112200001, range(2))
    env.deliver_all()
    clock.now += timedelta(seconds=120)
    sweep = reconciler.run(since, every_night=False)
    assert set(sweep.watermarks) == {"raw/LSSTCam/"}
    send(env, "LATISS", 2026112200001, range(1))  # an instrument the sweep never saw
    env.store.put("raw/stray.fits", b"not fits")
    lose_notifications(env)
    clock.now += timedelta(seconds=1)
    report = reconciler.run_new(since)
    assert report.outcomes == {"registered": 1, "quarantined": 1} and report.consistent
    assert set(report.watermarks) == {"raw/LATISS/", "raw/LSSTCam/"}
    assert reconciler.run_new(since).missing == 0  # the quarantined stray counts as settled
    assert reconciler.loose == {"raw/stray.fits"}
    clock.now += timedelta(seconds=120)
    # the sweep of the window's nights: an idle lane starts at the window's first night
    env.store.put("raw/LSSTComCam/20200101/CC_O_20200101_000001/x.fits", b"x")
    resweep = reconciler.run(since, every_night=False)
    day = f"{since - timedelta(days=1):%Y%m%d}"
    assert resweep.watermarks["raw/LSSTComCam/"] == f"raw/LSSTComCam/{day}/"
