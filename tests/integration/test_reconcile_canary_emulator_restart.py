"""An emulator restarted under a running pipeline: the 30 CCDs stored afterwards are all
registered within 2 minutes of the restart, by the facility service, with no manual step.

A restarted fake-gcs-server forgets the bucket's notification configs; a restarted Pub/Sub
emulator forgets every topic and subscription. Either way notifications stop, silently: before
the facility service, 30/30 CCDs stored afterwards were never registered. Now the reconcile
pass (every 30 s, objects older than 15 s) registers them whatever broke; the canary (every
30 s, overdue after 60 s) says notifications are broken, the local stack's repair re-provisions
topics, subscriptions and notification configs, and the next canary comes back: healthy again.

The reconcile runs at its defaults (a pass every 30 s, 15 s grace: what the 2-minute promise
rests on); the canary is judged after 30 s instead of 60 s, which only brings the repair one pass
earlier and keeps the test under 3 minutes.

The emulators are this test's own (free ports, own run directory): restarting them never
disturbs the shared stack. PostgreSQL is the shared one (a fresh database).
"""

from __future__ import annotations

import time

import pytest

from functions.register.facility.settings import ReconcileSettings, RedriveSettings
from functions.register.facility.wiring import build_facility
from infra.local.provision import setup
from infra.local.relay import RelaySettings
from tests.integration.fixtures.handles import PostgresServer
from tests.integration.fixtures.pipeline import Pipeline, build_pipeline, small_ccds, wait_for
from tests.integration.fixtures.private_stack import PrivateStack

pytestmark = pytest.mark.integration

CCDS = 30
PROMISE_SECONDS = 120


@pytest.fixture
def emulators():
    stack = PrivateStack(["pubsub", "gcs"]).up()
    yield stack
    stack.down()


def _repair(pipe: Pipeline):
    """What ``obsingest reconcile --every`` wires on the local stack (provision.setup)."""

    def repair() -> None:
        setup(pipe.bucket, pipe.bus, storage_client=pipe.store.client, relay=RelaySettings())

    return repair


def _outage(emulators: PrivateStack, postgres_server: PostgresServer, restart: str) -> dict:
    with emulators.use():
        pipe = build_pipeline(postgres_server.admin_url, tag=f"restart-{restart}")
        settings = ReconcileSettings(canary_timeout=30.0)
        facility = build_facility(
            pipe.service, pipe.bus, settings, RedriveSettings(), repair=_repair(pipe)
        )
        pipe.closers.append(facility.stop)
        try:
            facility.start()
            # notifications flow: CCDs and the first canary come back as events
            warmup = small_ccds(9, first_seq=201)
            assert pipe.upload(warmup) == ["stored"] * 9
            wait_for(lambda: pipe.registered() >= 9, 60, "the warm-up CCDs")
            wait_for(lambda: pipe.registry.audit.last_canary_seen() is not None, 60, "a canary")
            assert facility.stats.snapshot()["notifications_healthy"] == 1

            back_at = emulators.restart(restart)
            ccds = small_ccds(CCDS, first_seq=211)
            assert pipe.upload(ccds) == ["stored"] * CCDS
            took = wait_for(
                lambda: pipe.registered() >= 9 + CCDS,
                PROMISE_SECONDS - (time.monotonic() - back_at),
                f"{CCDS} CCDs stored after the {restart} restart to be registered",
            )
            registered_after = time.monotonic() - back_at
            # notifications found broken, repaired, and flowing again: a canary comes back
            wait_for(
                lambda: (
                    facility.stats.snapshot()["repairs"] >= 1
                    and facility.stats.snapshot()["notifications_healthy"] == 1
                ),
                180,
                "the canary to find notifications broken, the repair, and a canary seen again",
            )
            wait_for(lambda: pipe.registry.outbox.status().pending == 0, 60, "the outbox drain")
            rows = pipe.registry.datasets()
            stats = facility.stats.snapshot()
            return {
                "pipe": pipe,
                "rows": rows,
                "ccds": {**warmup, **ccds},
                "stats": stats,
                "registered_after": registered_after,
                "took": took,
            }
        finally:
            pipe.close()


def _check(result: dict, restart: str) -> None:
    rows, ccds, stats = result["rows"], result["ccds"], result["stats"]
    assert sorted((r["exposure"], r["detector"]) for r in rows) == sorted(
        (d.exposure, d.detector) for d in ccds
    )  # every CCD, each once
    assert result["registered_after"] <= PROMISE_SECONDS
    assert stats["registered_by_reconcile"] >= CCDS  # reconcile did it, no notification did
    assert stats["repairs"] >= 1 and stats["notifications_healthy"] == 1
    print(
        f"{restart} restart: {CCDS}/{CCDS} registered {result['registered_after']:.0f} s after "
        f"the emulator was back; repairs {stats['repairs']}"
    )


def test_gcs_emulator_restart(emulators: PrivateStack, postgres_server: PostgresServer) -> None:
    result = _outage(emulators, postgres_server, "gcs")
    _check(result, "gcs")
    # Pub/Sub was untouched: the arrivals of every CCD reached the subscriber
    assert set(result["pipe"].unique_arrivals()) == {r["id"] for r in result["rows"]}


def test_pubsub_emulator_restart(emulators: PrivateStack, postgres_server: PostgresServer) -> None:
    result = _outage(emulators, postgres_server, "pubsub")
    _check(result, "pubsub")
