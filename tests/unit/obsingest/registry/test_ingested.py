"""The exposures-ingested check on SQLite: complete or not, exactly one event per exposure (also
under a race of checks), closures counted once, the deadline and the sweep."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, select

from obsingest.messages import ExposureIngested
from obsingest.registry import Registry, migrations
from obsingest.registry.facility_tables import exposure_closure
from obsingest.registry.ingested import (
    ALREADY,
    CLOSED_INCOMPLETE,
    EMITTED,
    NO_MANIFEST,
    NOT_COMPLETE,
    IngestedCheck,
    event_id,
)
from obsingest.registry.manifests import record_manifest
from obsingest.settings import RegistrySettings
from tests.unit.obsingest.registry.conftest import DAY_OBS, manifest, register

pytestmark = pytest.mark.unit

E = DAY_OBS * 100_000 + 7
TOPIC = "exposures-ingested"


def check(registry: Registry, **kw) -> IngestedCheck:
    return IngestedCheck(registry, TOPIC, 5.0, **kw)


def closures(registry: Registry) -> list[dict]:
    with registry.engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(exposure_closure)).mappings()]


def test_no_manifest_no_event_even_when_every_detector_is_registered(registry):
    for det in range(9):  # all of LSSTComCam: the instrument's set is not guessed
        register(registry, E, det, 1.0)
    assert check(registry).check("LSSTComCam", E).outcome == NO_MANIFEST
    assert registry.outbox.status().pending == 0 and closures(registry) == []


def test_the_last_expected_ccd_completes_the_exposure_once(registry):
    record_manifest(registry, manifest(E, [0, 1, 2]))
    checker = check(registry)
    register(registry, E, 0, 1.0)
    register(registry, E, 1, 2.0)
    assert checker.check("LSSTComCam", E).outcome == NOT_COMPLETE
    register(registry, E, 2, 3.0)
    closing = checker.check("LSSTComCam", E)
    assert closing.outcome == EMITTED and closing.counted and closing.status == "ok"
    event = ExposureIngested.decode(closing.message.payload)
    assert event == closing.event
    assert event.event_id == event_id("LSSTComCam", E)
    assert (event.expected, event.registered, event.detectors) == (3, 3, [0, 1, 2])
    assert (event.missing_detectors, event.over_budget, event.manifest_known) == ([], [], True)
    assert event.latency_max == pytest.approx(3.0, abs=0.5)
    assert event.latency_p50 == pytest.approx(2.0, abs=0.5)
    assert event.first_readout < event.last_registered <= event.published_time
    assert (event.run, event.dataset_type, event.day_obs) == ("LSSTComCam/raw/all", "raw", DAY_OBS)
    assert closing.message.key == f"LSSTComCam/{E}"
    assert closing.message.attributes["schema"] == "ExposureIngested"
    row = registry.outbox.row(event.event_id)
    assert row["payload"] == closing.message.payload and row["topic"] == TOPIC
    # asked again (a redelivery, the sweep, a second process): nothing more
    assert checker.check("LSSTComCam", E).outcome == ALREADY
    assert registry.outbox.status().pending == 1
    [closure] = closures(registry)
    assert (closure["status"], closure["closed_by"], closure["missing"]) == ("ok", "register", 0)
    assert closure["ingested_at"] is not None


def test_a_slow_ccd_makes_it_over_budget(registry):
    record_manifest(registry, manifest(E, [0, 1]))
    register(registry, E, 0, 1.0)
    register(registry, E, 1, 8.0)
    closing = check(registry).check("LSSTComCam", E)
    assert (closing.outcome, closing.status) == (EMITTED, "over_budget")
    assert closing.event.over_budget == [1] and closing.max_latency > 7.5


def test_detectors_the_manifest_did_not_list_do_not_complete_it(registry):
    record_manifest(registry, manifest(E, [0, 1, 2]))
    for det in (0, 1, 5):  # as many CCDs as expected, but 5 instead of 2
        register(registry, E, det, 1.0)
    closing = check(registry).check("LSSTComCam", E)
    assert closing.outcome == NOT_COMPLETE and closing.presence.missing == (2,)
    register(registry, E, 2, 1.0)
    closing = check(registry).check("LSSTComCam", E)
    assert closing.outcome == EMITTED
    assert (closing.event.registered, closing.event.detectors) == (4, [0, 1, 2])


def test_racing_checks_write_one_event_and_count_one_closure(registry, monkeypatch):
    """Every checker sees the exposure complete, then they all write at once: one wins."""
    record_manifest(registry, manifest(E, [0, 1]))
    register(registry, E, 0, 1.0)
    register(registry, E, 1, 1.0)
    checkers = [check(registry) for _ in range(6)]
    barrier = threading.Barrier(len(checkers))
    for checker in checkers:  # hold each one between its read and its write
        emit = checker._emit

        def held(presence, expected, emit=emit):
            barrier.wait(timeout=10)
            return emit(presence, expected)

        monkeypatch.setattr(checker, "_emit", held)
    results = [None] * len(checkers)

    def run(i):
        results[i] = checkers[i].check("LSSTComCam", E)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(checkers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == [ALREADY] * 5 + [EMITTED]
    assert sum(r.counted for r in results) == 1
    assert registry.outbox.status().pending == 1 and len(closures(registry)) == 1


def test_the_deadline_closes_it_incomplete_once_and_a_late_completion_still_emits(registry):
    record_manifest(registry, manifest(E, [0, 1, 2]))
    register(registry, E, 0, 1.0)
    reconcile = check(registry, closed_by="reconcile")
    first = reconcile.close_incomplete("LSSTComCam", E)
    assert (first.outcome, first.counted, first.status, first.missing) == (
        CLOSED_INCOMPLETE,
        True,
        "incomplete",
        2,
    )
    again = reconcile.close_incomplete("LSSTComCam", E)  # a restart, a second pass
    assert again.outcome == CLOSED_INCOMPLETE and not again.counted
    register(registry, E, 1, 40.0)
    register(registry, E, 2, 41.0)
    late = check(registry).check("LSSTComCam", E)
    # the event downstream waits for, but the exposure was counted already (incomplete)
    assert late.outcome == EMITTED and not late.counted and late.status == "over_budget"
    [closure] = closures(registry)
    assert (closure["status"], closure["closed_by"], closure["missing"]) == ("incomplete", "reconcile", 2)
    assert closure["ingested_at"] is not None
    assert check(registry).check("LSSTComCam", E).outcome == ALREADY


def test_closing_a_complete_exposure_at_its_deadline_emits_it(registry):
    record_manifest(registry, manifest(E, [0]))
    register(registry, E, 0, 1.0)  # its check was lost
    closing = check(registry, closed_by="reconcile").close_incomplete("LSSTComCam", E)
    assert closing.outcome == EMITTED and closing.counted and closing.status == "ok"


def test_the_sweep_emits_lost_checks_and_closes_overdue_exposures(registry):
    now = datetime.now(UTC)
    e_done, e_overdue, e_young = E, E + 1, E + 2
    record_manifest(registry, manifest(e_done, [0, 1]))
    record_manifest(registry, manifest(e_overdue, [0, 1], obs_start=now - timedelta(seconds=90)))
    record_manifest(registry, manifest(e_young, [0, 1], obs_start=now - timedelta(seconds=10)))
    for exposure in (e_done, e_overdue, e_young):
        register(registry, exposure, 0, 1.0)
    register(registry, e_done, 1, 1.0)  # complete, never checked (a process died)
    sweeper = check(registry, closed_by="reconcile")
    since = now - timedelta(hours=1)
    # obs_start + 15 s exposure + 30 s allowance: passed for e_overdue, not for e_young
    opened = {o.exposure: o for o in sweeper.open_exposures(since, 30.0)}
    assert set(opened) == {e_done, e_overdue, e_young}
    assert opened[e_done].registered == 2 and opened[e_overdue].closed is None
    assert opened[e_young].deadline == now - timedelta(seconds=10) + timedelta(seconds=45)
    done = sweeper.sweep(since, 30.0)
    assert [(c.exposure, c.outcome, c.counted) for c in done] == [
        (e_done, EMITTED, True),
        (e_overdue, CLOSED_INCOMPLETE, True),
    ]
    assert sweeper.sweep(since, 30.0) == []  # nothing counted or written twice
    # manifests recorded before the window are not looked at
    assert sweeper.open_exposures(now + timedelta(minutes=1), 30.0) == []


def test_the_sweep_closes_an_overdue_exposure_as_many_ccds_as_expected_but_one_unlisted(registry):
    """A CCD the manifest did not list stands in the count for a missing one: the sweep must
    still close the exposure incomplete at its deadline (it checked it, not complete, forever)."""
    now = datetime.now(UTC)
    record_manifest(registry, manifest(E, [0, 1, 2], obs_start=now - timedelta(seconds=90)))
    for det in (0, 1, 5):  # detector 2 lost, 5 not in the manifest
        register(registry, E, det, 1.0)
    sweeper = check(registry, closed_by="reconcile")
    done = sweeper.sweep(now - timedelta(hours=1), 30.0)
    assert [(c.exposure, c.outcome, c.counted, c.missing) for c in done] == [(E, CLOSED_INCOMPLETE, True, 1)]
    assert sweeper.sweep(now - timedelta(hours=1), 30.0) == []
    register(registry, E, 2, 120.0)  # late after all: its event still comes
    assert sweeper.sweep(now - timedelta(hours=1), 30.0)[0].outcome == EMITTED


def test_migration_6_adds_the_closures_to_an_existing_registry(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    saved = migrations.MIGRATIONS
    monkeypatch.setattr(migrations, "MIGRATIONS", tuple(m for m in saved if m.version < 6))
    old = Registry.open(RegistrySettings(url=url))
    record_manifest(old, manifest(E, [0]))
    register(old, E, 0, 1.0)
    assert not inspect(old.engine).has_table("exposure_closure")
    old.close()
    monkeypatch.setattr(migrations, "MIGRATIONS", saved)
    registry = Registry.open(RegistrySettings(url=url))
    try:
        assert inspect(registry.engine).has_table("exposure_closure")
        names = {i["name"] for i in inspect(registry.engine).get_indexes("exposure_manifest")}
        assert "ix_exposure_manifest_recorded" in names
        assert check(registry).check("LSSTComCam", E).outcome == EMITTED
    finally:
        registry.close()


def test_a_manifest_whose_deadline_is_no_instant_does_not_stop_the_sweep(registry):
    """exposure_time = 1e308 is finite, so the manifest was recorded; its deadline overflowed in
    open_exposures at every facility pass, and no exposure of the window was swept again."""
    now = datetime.now(UTC)
    record_manifest(registry, manifest(E, [0, 1], exposure_time=1e308))
    record_manifest(registry, manifest(E + 1, [0, 1], obs_start=now - timedelta(seconds=90)))
    register(registry, E + 1, 0, 1.0)
    sweeper = check(registry, closed_by="reconcile")
    opened = {o.exposure: o for o in sweeper.open_exposures(now - timedelta(hours=1), 30.0)}
    assert opened[E].deadline is None
    done = sweeper.sweep(now - timedelta(hours=1), 30.0)
    assert [(c.exposure, c.outcome) for c in done] == [(E + 1, CLOSED_INCOMPLETE)]
