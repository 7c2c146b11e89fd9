"""The facility service's pass on the embedded stores: canary -> repair -> reconcile -> drain ->
redrive, stats and health; a failing stage never stops the others."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from functions.register.facility.service import DEGRADED, HEALTHY, NOTIFICATIONS_BROKEN
from functions.register.facility.settings import ReconcileSettings, RedriveSettings
from functions.register.facility.wiring import build_facility, build_redriver
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId
from obsingest.errors import RetriableError
from obsingest.settings import BusSettings
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd
from tests.unit.functions.register.facility.test_redrive import FakeHold, letter

pytestmark = pytest.mark.unit

READOUT = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)


def upload(env, detector: int) -> None:
    did = DataId("LSSTComCam", 2026112200001, detector)
    DirectUploader(env.store).send(did, small_ccd(did.exposure, detector), READOUT)


def lose_notifications(env) -> None:
    outbox = env.store.outbox()
    for path, _ in outbox.pending():
        outbox.ack(path)


def facility(env, **overrides):
    settings = ReconcileSettings(grace=0.0, canary_timeout=60, **overrides)
    return build_facility(env.service, BusSettings(), settings, RedriveSettings(enabled=False))


def test_settings_defaults_meet_the_two_minute_promise():
    """A CCD whose notification is lost is registered by the next pass older than the grace:
    at most grace + every (+ the pass itself) after it was stored."""
    settings = ReconcileSettings()
    assert settings.grace + settings.every <= 60
    assert settings.canary_timeout + settings.canary_every <= 120


def test_a_pass_registers_what_notifications_missed_and_reports_healthy(env):
    service = facility(env)
    upload(env, 1)
    lose_notifications(env)
    report = service.run_pass()
    assert report.reconcile.outcomes == {"registered": 1} and not report.errors
    stats = service.snapshot()
    assert stats["registered_by_reconcile"] == 1 and stats["passes"] == 1
    assert stats["canaries_written"] == 1 and stats["notifications_healthy"] == 1
    assert service.health() == HEALTHY


def test_broken_notifications_are_reported_repaired_and_widen_the_window(env):
    repairs = []
    service = facility(env, window=60.0)
    service.repair = lambda: repairs.append(1)
    clock = [datetime.now(UTC)]
    service.clock = service.canary.clock = service.reconciler.clock = lambda: clock[0]
    service.run_pass()  # writes a canary, which is never delivered
    lose_notifications(env)
    clock[0] += timedelta(seconds=61)
    report = service.run_pass()
    assert not report.canary.healthy and report.repaired and repairs == [1]
    assert service.health() == NOTIFICATIONS_BROKEN
    # the reconcile window reaches back before the outage's start, beyond the 60 s window
    assert report.reconcile.since < report.canary.broken_since
    clock[0] += timedelta(seconds=1)
    assert not service.run_pass().repaired  # at most one repair per repair_every


def test_a_restart_after_a_stop_longer_than_the_window_reaches_back_to_the_last_pass(env):
    clock = [datetime.now(UTC)]

    def started():
        service = facility(env, window=60.0)
        service.clock = service.canary.clock = service.reconciler.clock = lambda: clock[0]
        return service

    started().run_pass()  # the last pass before the stop: its canary is written and seen
    env.deliver_all()
    last_pass = clock[0]
    upload(env, 3)  # stored just after, its notification lost while the facility was down
    lose_notifications(env)
    clock[0] += timedelta(hours=10)  # a night's stop: far beyond the 60 s window
    service = started()
    report = service.run_pass()
    assert report.canary.healthy  # nothing the canary could have seen
    assert report.reconcile.since < last_pass and report.reconcile.outcomes == {"registered": 1}
    clock[0] += timedelta(seconds=30)
    assert service.run_pass().reconcile.since == clock[0] - timedelta(seconds=60)  # back to it


def test_a_failing_stage_does_not_stop_the_others(env, monkeypatch):
    service = facility(env, canary=False)
    upload(env, 2)
    env.deliver_all()

    def broken(*args, **kwargs):
        raise RetriableError("registry unavailable")

    monkeypatch.setattr(service.reconciler, "run", broken)
    report = service.run_pass()
    assert report.errors and report.errors[0].startswith("reconcile")
    assert service.health() == DEGRADED and service.snapshot()["failed_passes"] == 1


def test_the_pass_drains_the_outbox_and_redrives_due_letters(env, monkeypatch):
    upload(env, 3)
    original = env.bus.publish

    def down(*args, **kwargs):
        raise RetriableError("404 topic")

    monkeypatch.setattr(env.bus, "publish", down)
    env.deliver_all()
    monkeypatch.setattr(env.bus, "publish", original)
    hold, dlq_bus = FakeHold(letter(1)), InMemoryBus()
    redriver = build_redriver(BusSettings(), RedriveSettings(first_delay=0), publisher=dlq_bus, source=hold)
    service = build_facility(
        env.service, BusSettings(), ReconcileSettings(grace=0.0, canary=False), redriver=redriver
    )
    report = service.run_pass()
    assert report.drained == 1 and len(env.arrivals()) == 1
    assert report.redrive.redriven == 1 and len(dlq_bus.topics["ccd-objects"]) == 1
    stats = service.snapshot()
    assert stats["outbox_published"] == 1 and stats["outbox_pending"] == 0
    assert stats["redriven"] == 1


def test_full_sweeps_list_every_night_at_first_and_once_a_day(env, monkeypatch):
    """Between, a full sweep lists only the nights its window can hold (a bucket keeps months);
    the daily one reaches back to the last one's window for an old night's CCD sent late whose
    notification was lost."""
    from functions.register.facility import service as module

    service = facility(env, full_every=60.0)
    asked: list[tuple[bool, datetime | None]] = []
    run = service.reconciler.run

    def spy(since, **kw):
        asked.append((kw["every_night"], kw.get("late_since")))
        return run(since, **kw)

    monkeypatch.setattr(service.reconciler, "run", spy)
    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    starts = []
    for hours in (0, 0.5, 23, 24.1, 25):
        clock[0] = 1000.0 + hours * 3600
        now = datetime.now(UTC)
        starts.append(now - timedelta(seconds=service.window))
        service._reconcile(now, starts[-1])
    assert [every for every, _ in asked] == [True, False, False, True, False]
    assert [late for _, late in asked] == [None, None, None, starts[0], None]
