"""The register function down for ~50 s with the relay running: every CCD registered afterwards,
none left dead-lettered, no manual step.

The relay runs with the policy the issue found in place (5 pushes in ~20 s), so the outage does
dead-letter the CCDs in flight; the facility service's periodic redrive, with its default
policy (first redrive 30 s after dead-lettering), brings them back once the function is up.
Before redrive existed, all 30 stayed dead-lettered and none was registered.

Real services: the GCS and Pub/Sub emulators, PostgreSQL, functions-framework over HTTP.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from functions.register.facility.service import FacilityService
from functions.register.facility.settings import RedriveSettings
from functions.register.facility.wiring import build_redriver
from infra.local.relay import RelaySettings
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService
from tests.integration.fixtures.pipeline import (
    build_pipeline,
    function_env,
    small_ccds,
    wait_for,
)
from tests.integration.fixtures.private_stack import free_port

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 50
CCDS = 30


def test_ccds_dead_lettered_while_the_function_was_down_are_redriven_and_registered(
    gcs: GcsService, pubsub: PubSubService, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    ccds = small_ccds(CCDS, first_seq=11)
    # the relay's policy before this change: 5 attempts, 1 s doubling -> dead-lettered in ~20 s
    relay_settings = RelaySettings(max_attempts=5, min_backoff=1.0, max_backoff=60.0)
    port = free_port()
    pipe = build_pipeline(
        postgres_server.admin_url,
        relay_settings,
        push_url=f"http://127.0.0.1:{port}/",
        tag="redrive",
        start_relay=False,
    )
    function = FunctionProcess(function_env(pipe), tmp_path / "function.log", port=port)
    redrive = FacilityService(
        announcer=pipe.service.announcer,
        redriver=build_redriver(pipe.bus, RedriveSettings()),  # the default policy
        every=5.0,
    )
    pipe.closers += [function.stop, redrive.stop]
    try:
        pipe.relay.start()
        redrive.start()
        # the function is down when the CCDs arrive, and stays down for OUTAGE_SECONDS
        down_at = time.monotonic()
        assert pipe.upload(ccds) == ["stored"] * CCDS
        wait_for(
            lambda: pipe.relay.stats.dead_lettered >= CCDS, 45, "the outage to dead-letter them"
        )
        assert pipe.registered() == 0
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        function.start()
        up_at = time.monotonic()
        wait_for(lambda: pipe.registered() >= CCDS, 150, f"{CCDS} registrations")
        took = time.monotonic() - up_at
        wait_for(lambda: len(pipe.unique_arrivals()) >= CCDS, 60, f"{CCDS} arrivals")
        assert pipe.relay.wait_idle(quiet=2.0, timeout=60)
        redrive.stop()

        rows = pipe.registry.datasets()
        assert sorted((r["exposure"], r["detector"]) for r in rows) == sorted(
            (d.exposure, d.detector) for d in ccds
        )  # every CCD, each exactly once
        assert set(pipe.unique_arrivals()) == {r["id"] for r in rows}
        assert pipe.dead_letters() == 0  # none left dead-lettered
        stats = redrive.stats.snapshot()
        assert stats["redriven"] >= CCDS and stats["parked"] == 0  # the redrive did it
        assert pipe.registry.outbox.status().pending == 0
        print(f"{CCDS}/{CCDS} registered {took:.0f} s after the function came back")
    finally:
        pipe.close()
