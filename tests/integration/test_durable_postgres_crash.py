"""PostgreSQL crashes (``pg_ctl restart -m immediate``) in the middle of 300 small CCDs: nothing
that was acked is lost, and ``obsingest stack status/down`` still manage the restarted server.

The registry acks a notification only after its commit; with the stack's PostgreSQL durable
(the default now) an acknowledged commit survives the crash. Before, the stack ran it with
``fsync`` and ``synchronous_commit`` off and 4-8 of 300 CCDs were registered, acked and
announced, then gone. The check is strict: after the relay has acked every notification, the
registry must hold all 300 *before* any reconcile; reconcile then finds nothing missing.

Real services: a PostgreSQL of this test's own (on a free port, so the crash never touches the
shared one), the shared GCS and Pub/Sub emulators, the relay and the function in-process.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from functions.register.facility.reconcile import Reconciler
from infra.local.stack.process import port_open
from tests.integration.fixtures.handles import GcsService, PubSubService
from tests.integration.fixtures.pipeline import build_pipeline, small_ccds, wait_for
from tests.integration.fixtures.private_stack import PrivateStack

pytestmark = pytest.mark.integration

CCDS = 300


@pytest.fixture
def private_postgres():
    stack = PrivateStack(["postgres"]).up()  # durable: the stack's default
    yield stack
    stack.down()


def test_nothing_acked_is_lost_when_postgres_crashes_mid_run(
    gcs: GcsService, pubsub: PubSubService, private_postgres: PrivateStack
) -> None:
    ccds = small_ccds(CCDS, first_seq=101)
    admin_url = private_postgres.env()["OBSINGEST_REGISTRY_URL"]
    pipe = build_pipeline(admin_url, tag="pgcrash")
    first_pid = private_postgres.pid("postgres")
    crashed: dict[str, int] = {}

    def crash_when_a_third_is_registered() -> None:
        wait_for(lambda: pipe.registered() >= CCDS // 3, 120, "a third of the CCDs", poll=0.05)
        crashed["at_registered"] = pipe.registered()
        crashed["pid"] = private_postgres.crash_restart_postgres()

    try:
        crasher = threading.Thread(target=crash_when_a_third_is_registered)
        crasher.start()
        started = time.monotonic()
        assert pipe.upload(ccds, threads=8) == ["stored"] * CCDS
        crasher.join(timeout=180)
        assert "pid" in crashed, "the crash did not happen"
        # every notification pushed and acked (retried through the crash, none dead-lettered)
        wait_for(lambda: pipe.relay.stats.acked >= CCDS, 180, f"{CCDS} acks")
        assert pipe.relay.wait_idle(quiet=2.0, timeout=120)
        assert pipe.relay.stats.dead_lettered == 0
        took = time.monotonic() - started

        # strict: what was acked is in the registry, before any reconcile could add it
        rows = pipe.registry.datasets()
        assert sorted((r["exposure"], r["detector"]) for r in rows) == sorted(
            (d.exposure, d.detector) for d in ccds
        )
        wait_for(lambda: len(pipe.unique_arrivals()) >= CCDS, 60, f"{CCDS} arrivals")
        assert set(pipe.unique_arrivals()) == {r["id"] for r in rows}
        report = Reconciler(pipe.service, ("raw/",), grace=0.0).run(
            datetime(2000, 1, 1, tzinfo=UTC)
        )
        assert (report.listed, report.missing, report.gone) == (CCDS, 0, [])

        # the stack still manages the server the crash restarted under a new pid
        status = private_postgres.stack.service("postgres").status()
        assert status.running and status.healthy and status.pid == crashed["pid"] != first_pid
        print(
            f"crash after {crashed['at_registered']} registered; {CCDS}/{CCDS} registered, "
            f"acked and announced in {took:.0f} s"
        )
    finally:
        pipe.close()
    assert private_postgres.stack.down() == ["postgres"]
    assert not port_open("127.0.0.1", private_postgres.settings.postgres_port)
