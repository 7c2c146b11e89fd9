"""What each scenario asserts beyond "nothing lost, nothing doubled": that the fault did what it
should have done to the pipeline and that the mechanism meant to survive it is what recovered.

These are the assertions of the fault tests the suite replaced (edge crash, edge outage, spool
full, redrive, outbox, durable PostgreSQL, emulator restarts, edge over Kafka), kept at least as
strict; evidence comes from the registry, the journal, Pub/Sub and the processes' own JSON logs.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from typing import Any

from tests.chaos.faults import (
    EmulatorRestart,
    Kill,
    LinkFault,
    Outage,
    PostgresCrash,
    RedeliveryStorm,
    SpoolFull,
    TopicOutage,
)
from tests.chaos.runner import Run
from tests.chaos.world import DAY_OBS, INSTRUMENT


def _journal(run: Run) -> list[Any]:
    from producers.edge.journal import Journal

    journal = Journal(run.world.spool)
    try:
        return [i for i in journal.items() if i.key in run.sent]
    finally:
        journal.close()


def _facility_passes(run: Run) -> list[dict[str, Any]]:
    assert run.world.facility is not None
    return run.world.facility.events("facility.pass")


def _dead_letters_left(run: Run) -> int:
    """Letters waiting on the dead-letter hold subscription and on the parked one (peeked)."""
    from obsingest.settings import hold_subscription
    from tests.integration.fixtures.pipeline import waiting

    bus = run.world.bus
    held = (bus.objects_dlq_hold, hold_subscription(bus.objects_parked_topic))
    return sum(waiting(run.world.project, s) for s in held)


def _stored_between(run: Run, start: float, end: float) -> set[str]:
    """Names of the raw CCD objects the bucket created in [start, end] (epoch seconds)."""
    world = run.world
    return {
        b.name
        for b in world.store.client.list_blobs(world.bucket, prefix="raw/")
        if start <= b.time_created.timestamp() <= end
    }


def _when(value: Any) -> float:
    return datetime.fromisoformat(str(value)).timestamp()


# the edge --------------------------------------------------------------------------------------
def edge_resumed_after_kills(run: Run) -> None:
    """Killed mid-flight (CCDs in every stage), resumed from the journal; resends answered
    "exists", never a conflict."""
    kills = [f for f in run.fault_of(Kill) if f.process == "edge"]
    assert kills, "no edge kill happened"
    at_kill = [f.notes["journal_at_kill"] for f in kills]
    assert any(k["seen"] + k["compressed"] + k["sent"] > 0 for k in at_kill), at_kill
    assert run.world.edge is not None
    assert run.world.edge.events("edge.resumed_from_journal"), "no restart resumed anything"
    statuses = Counter(i.status for i in _journal(run))
    assert set(statuses) <= {"stored", "exists"}, statuses
    assert statuses["stored"] >= len(run.sent) - 10, statuses


def edge_rode_out_the_store_outage(run: Run) -> None:
    """While the link was down nothing got through and the health said why; when it came back
    the backlog drained at full speed, newest exposure first."""
    [outage] = [f for f in run.fault_of(LinkFault) if f.kind == "down"]
    down, up = outage.injected_at, outage.healed_at
    items = _journal(run)
    through = [i.key for i in items if i.acked_at and down + 6 < i.acked_at < up]
    assert through == [], f"acknowledged while the store was unreachable: {through}"
    reasons = [r for h in outage.notes["degraded"] for r in h["reasons"]]
    assert any("destination-unreachable" in r for r in reasons), outage.notes["degraded"][:3]
    assert run.world.edge is not None and run.world.edge.events("edge.retry"), "no retry seen"
    backlog = sorted(
        (i for i in items if i.seen_at < up and i.acked_at and i.acked_at >= up), key=lambda i: i.acked_at
    )
    exposures = sorted({i.priority for i in backlog})
    # a real backlog: two thirds of the exposures read out while the link was down (10 of 15)
    assert len(exposures) >= max(5, int((up - down) / run.night.interval * 2 / 3)), exposures
    assert backlog[0].priority == exposures[-1], "the newest exposure did not go first"
    first = {e: min(i.acked_at for i in backlog if i.priority == e) for e in exposures}
    newest, oldest = exposures[-2:], exposures[:2]
    assert max(first[e] for e in newest) < min(first[e] for e in oldest), first
    drain = max(i.acked_at for i in backlog) - up
    assert drain < 30, f"the backlog took {drain:.0f} s to drain"


def edge_retried_through_link_faults(run: Run) -> None:
    assert run.world.edge is not None and run.world.edge.events("edge.retry"), "no retry seen"


def spool_full_refused_loudly(run: Run) -> None:
    """New work refused (health, an error in the log), nothing journalled lost or half-taken
    while refusing, resumed by itself."""
    [fault] = run.fault_of(SpoolFull)
    refusing = [h for h in fault.samples if h.get("refusing_new_work")]
    assert refusing, f"the edge never refused new work: {fault.samples[-3:]}"
    assert all(h["status"] == "degraded" for h in refusing), refusing
    assert any(r.startswith("spool-full") for h in refusing for r in h["reasons"]), refusing[0]
    # bad files are still moved aside with a journal row while refusing; CCDs are not taken
    totals = [h["ccd_rows"] for h in refusing]
    assert len(set(totals[1:])) <= 1, f"new CCDs half-taken while refusing: {totals}"
    acked = [h["journal"]["acked"] for h in fault.samples]
    assert acked == sorted(acked), f"acknowledged CCDs went missing: {acked}"
    assert run.world.edge is not None
    refusals = run.world.edge.events("edge.refusing_new_work")
    assert refusals and refusals[0]["level"] == "error" and "spool" in refusals[0]["error"], (
        f"no loud refusal in the log: {refusals[:1]}"
    )
    assert run.world.edge.events("edge.resumed_new_work"), "never resumed"
    assert (run.edge_health or {}).get("status") == "ready", run.edge_health


# the facility ----------------------------------------------------------------------------------
def redrive_brought_back_the_dead_letters(run: Run) -> None:
    """The outage dead-lettered CCDs (the relay's policy gives up in ~20 s here), nothing was
    registered while the function was down (no reconcile to fall back on: its grace is an
    hour), and the periodic redrive brought every letter back: none left, none parked."""
    [outage] = run.fault_of(Outage)
    assert run.world.relay is not None
    dead = run.world.relay.events("relay.dead_lettered")
    dead_objects = {e["object"] for e in dead}
    down = (outage.notes["down_from"], outage.notes["down_until"])
    # stored once the function had exited (a graceful stop serves what is in flight first,
    # seconds under load), early enough for 5 pushes (~15 s) to fail
    stored = _stored_between(run, down[0] + 1, down[1] - 20)
    # under load a push can outlast its share of the outage: such a CCD is still being retried
    # when the function returns and is registered then (never during: checked below)
    after = {
        r["uri"].split("/", 3)[-1]
        for r in run.world.read(run.world.registry.datasets)
        if _when(r["ingest_time"]) >= down[1]
    }
    assert stored and stored & dead_objects and stored <= dead_objects | after, (
        f"stored while down but not dead-lettered: {sorted(stored - dead_objects - after)[:5]}"
    )
    during = [
        r for r in run.world.read(run.world.registry.datasets) if down[0] < _when(r["ingest_time"]) < down[1]
    ]
    assert during == [], f"{len(during)} registered while the function was down"
    # Settled means every CCD registered and every bad input quarantined; a letter dead-lettered
    # twice (redriven while the function was still down) may still wait out its backoff then.
    # The periodic redrive must take it too, bounded, with nobody's help.
    deadline = time.monotonic() + 120
    while (left := _dead_letters_left(run)) and time.monotonic() < deadline:
        time.sleep(5)
    assert left == 0, f"{left} dead letters still held or parked after 2 minutes"
    passes = _facility_passes(run)
    redriven = sum((p.get("redrive") or {}).get("redriven", 0) for p in passes)
    parked = sum((p.get("redrive") or {}).get("parked", 0) for p in passes)
    assert redriven >= len(dead) and parked == 0, (redriven, len(dead), parked)


def outbox_announced_after_the_topic_came_back(run: Run) -> None:
    """Registration went on while the topic was gone, every announcement waited in the outbox
    and was published once the topic was back, stamped when published, never dead-lettered."""
    [outage] = run.fault_of(TopicOutage)
    grew = outage.notes["registered_at_heal"] - outage.notes["registered_at_delete"]
    assert grew >= 1, "nothing was registered while the topic was gone"
    assert outage.notes["outbox_at_heal"] >= grew, outage.notes
    assert run.world.observer is not None
    for a in run.world.observer.announcements():
        assert a.published > a.registered, a
    status = run.world.read(run.world.registry.outbox.status)
    assert (status.pending, status.published) == (0, len(run.sent)), status
    assert run.world.relay is not None
    assert not run.world.relay.events("relay.dead_lettered"), "the relay dead-lettered some"
    assert _dead_letters_left(run) == 0, "dead letters left (held or parked)"


def relay_rode_out_the_registry_outage(run: Run) -> None:
    """A minute without the registry: the relay's redeliveries (10 over ~4 min) ride it out:
    503s answered, nothing dead-lettered."""
    assert run.world.relay is not None
    assert run.world.relay.events("relay.nacked"), "the outage was never noticed"
    assert not run.world.relay.events("relay.dead_lettered"), "the relay dead-lettered some"


def relay_retried(run: Run) -> None:
    assert run.world.relay is not None
    assert run.world.relay.events("relay.nacked"), "no push was ever refused: no fault seen"


def postgres_crash_lost_nothing_acked(run: Run) -> None:
    """Durable PostgreSQL: what was acknowledged before the crash is there after it, without
    reconcile having to add anything (its grace is a minute here, longer than any redelivery);
    the stack still manages the server the crash restarted."""
    crashes = run.fault_of(PostgresCrash)
    assert crashes, "no crash happened"
    for crash in crashes:
        n = crash.notes
        assert n["running"] and n["healthy"] and n["status_pid"] == n["new_pid"] != n["old_pid"], n
    assert run.world.facility is not None
    added = run.world.facility.events("reconcile.registered_missing")
    assert added == [], f"reconcile had to register {len(added)}: acknowledged rows were lost"
    assert run.world.relay is not None
    assert not run.world.relay.events("relay.dead_lettered"), "the relay dead-lettered some"


def emulator_restart_repaired_within_2_minutes(run: Run) -> None:
    """Notifications stopped silently; reconcile registered what they missed, each CCD within
    2 minutes of the restart (or of being stored, if later); the canary found notifications
    broken, the repair re-provisioned them and a canary came back."""
    [restart] = run.fault_of(EmulatorRestart)
    assert run.world.facility is not None
    facility = run.world.facility
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        passes = _facility_passes(run)
        if facility.events("notifications.repaired") and passes[-1]["notifications_healthy"]:
            break
        time.sleep(2)
    assert facility.events("notifications.repaired"), "never repaired"
    assert _facility_passes(run)[-1]["notifications_healthy"], "no canary came back"
    added = {
        e["object"]
        for e in facility.events("reconcile.registered_missing")
        if e.get("status") == "registered"
    }
    repaired = min(_when(e["ts"]) for e in facility.events("notifications.repaired"))
    # stored after the restart and before the repair: no notification could carry them
    silent = _stored_between(run, restart.injected_at + 1, repaired - 5)
    # a notification the relay had pulled and pushed (the function registered it) whose ack then
    # failed because the restarted emulator forgot the subscription was not silent
    assert run.world.relay is not None
    settle_failed = run.world.relay.events("relay.settle_failed")
    delivered = {e["object"] for e in settle_failed if "object" in e}
    silent -= delivered
    assert silent, "nothing was stored while notifications were broken"
    assert silent <= added, f"not registered by reconcile: {sorted(silent - added)[:5]}"
    world = run.world
    stored = {
        f"gs://{world.bucket}/{b.name}": b.time_created.timestamp()
        for b in world.store.client.list_blobs(world.bucket, prefix="raw/")
    }
    late = []
    for row in world.read(world.registry.datasets):
        since = max(stored[row["uri"]], restart.injected_at)
        if _when(row["ingest_time"]) - since > 120:
            late.append((row["exposure"], row["detector"], _when(row["ingest_time"]) - since))
    assert late == [], f"registered later than 2 minutes after the restart: {late[:5]}"


def reconcile_registered_what_notifications_missed(run: Run) -> None:
    """Notifications stopped: the canary saw it, the repair re-provisioned them, and reconcile
    registered what they missed. The canary needs its timeout after the first canary written
    once the store is back, so the repair may come after reconcile has registered the night
    (gcs-down-30s, seed 827134: every CCD registered 24 s before the canary could judge)."""
    facility = run.world.facility
    assert facility is not None
    deadline = time.monotonic() + 120
    while not facility.events("notifications.repaired") and time.monotonic() < deadline:
        time.sleep(2)
    assert facility.events("notifications.repaired"), "never repaired"
    assert facility.events("reconcile.registered_missing"), "reconcile added nothing"


def reconcile_repaired_lost_notifications(run: Run) -> None:
    reconcile_registered_what_notifications_missed(run)
    assert run.world.facility is not None
    assert run.world.facility.kills >= 1, "the facility service was never killed"


def kafka_every_ccd_acked_by_the_broker(run: Run) -> None:
    statuses = Counter(i.status for i in _journal(run))
    assert set(statuses) == {"acked"}, statuses
    assert run.world.assembler is not None and run.world.assembler.kills >= 1, "no kill"


# the exposures ---------------------------------------------------------------------------------
def one_exposure_ingested_per_exposure(run: Run) -> None:
    """With manifests published: every exposure of the night got its ExposureIngested (complete:
    every CCD its manifest expects registered), and no exposure two *different* ones. The same
    event delivered again (at least once: a crash between publish and marking it published) is
    noted, not failed: subscribers deduplicate on ``event_id``."""
    ingested = run.world.ingested
    assert ingested is not None, "the world runs without manifests"
    expected = {f"{INSTRUMENT}/{DAY_OBS * 100_000 + seq}" for seq in range(1, run.night.exposures + 1)}
    deadline = time.monotonic() + 120  # a lost check is the facility sweep's, every pass
    while not expected <= set(ingested.per_exposure()) and time.monotonic() < deadline:
        time.sleep(2.0)
    per_exposure = ingested.per_exposure()
    events = ingested.events()
    repeats = len(events) - len(per_exposure)
    run.note(
        f"exposures-ingested: {len(per_exposure)} exposures, {len(events)} messages "
        f"({repeats} repeated deliveries of the same event)"
    )
    missing = sorted(expected - set(per_exposure))
    assert not missing, f"{len(missing)} exposures without an ExposureIngested: {missing[:5]}"
    different = sorted(key for key, seen in per_exposure.items() if len(seen) > 1)
    assert not different, f"exposures with two different ExposureIngested: {different[:5]}"
    unexpected = sorted(set(per_exposure) - expected)
    assert not unexpected, f"ExposureIngested for exposures nobody played: {unexpected[:5]}"
    for item in events:
        event = item.event
        assert event.registered == event.expected == run.night.detectors, (item.key, event)
        assert not event.missing_detectors and event.manifest_known, (item.key, event)


def butler_cli_lists_each_ccd_once(run: Run) -> None:
    """A Butler world, counted once more the way a person would: ``butler query-datasets REPO raw
    --collections '*'`` (the real CLI) lists every CCD handed off exactly once, and nothing else."""
    from tests.integration.fixtures.butler import query_datasets

    rows = query_datasets(run.world.butler_repo, "*")
    listed = Counter(f"{r['instrument']}/{r['exposure']}/{int(r['detector']):03d}" for r in rows)
    doubled = sorted(k for k, n in listed.items() if n > 1)
    assert not doubled, f"listed more than once: {doubled[:5]}"
    missing, extra = sorted(run.sent - set(listed)), sorted(set(listed) - run.sent)
    assert not missing and not extra, f"missing {missing[:5]}, nobody sent {extra[:5]}"


def storm_redelivered(run: Run) -> None:
    """The storm did publish its copies, and they reached the function: a redelivered CCD is
    announced again (at-least-once), so the observer saw repeated announcements, while the
    Butler holds each CCD once (the scenario's count)."""
    [storm] = run.fault_of(RedeliveryStorm)
    assert storm.notes.get("published", 0) > 0, storm.notes
    assert run.tally.duplicate_announcements > 0, "no redelivered CCD was announced again"
