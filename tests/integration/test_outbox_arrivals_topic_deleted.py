"""The ``ccd-arrivals`` topic deleted for 30 s while CCDs arrive: every CCD registered at once
(its ArrivalEvent kept in the registry's outbox, in the same transaction), and every one
announced, exactly once, after the topic is back, by the outbox drain, with no manual step.

Before the outbox, the function answered 503 for each CCD until the relay dead-lettered it
(`HTTP 503: retriable: publish to .../ccd-arrivals: 404`): 30 registered, none announced.

Real services: the GCS and Pub/Sub emulators, PostgreSQL; the relay pushes to the function's
entry point in-process; the facility service drains the outbox every 5 s.
"""

from __future__ import annotations

import time

import pytest

from functions.register.facility.service import FacilityService
from obsingest.bus.pubsub import topic_path
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService
from tests.integration.fixtures.pipeline import build_pipeline, small_ccds, wait_for

pytestmark = pytest.mark.integration

TOPIC_GONE_SECONDS = 30
CCDS = 30


def test_ccds_registered_while_the_arrivals_topic_was_gone_are_all_announced_once(
    gcs: GcsService, pubsub: PubSubService, postgres_server: PostgresServer
) -> None:
    ccds = small_ccds(CCDS, first_seq=21)
    pipe = build_pipeline(postgres_server.admin_url, tag="outbox", arrivals_subscriber=False)
    drain = FacilityService(announcer=pipe.service.announcer, every=5.0)
    pipe.closers.append(lambda: drain.stop())
    arrivals_topic = topic_path(pipe.project, pipe.bus.arrivals_topic)
    admin = pubsub.publisher()
    try:
        thread = drain.start()
        admin.delete_topic(request={"topic": arrivals_topic})
        gone_at = time.monotonic()
        assert pipe.upload(ccds) == ["stored"] * CCDS
        # registered and acked while the topic is gone: the announcements wait in the outbox
        wait_for(lambda: pipe.registered() >= CCDS, 25, f"{CCDS} registrations")
        assert pipe.registry.outbox.status().pending == CCDS
        time.sleep(max(0.0, TOPIC_GONE_SECONDS - (time.monotonic() - gone_at)))
        # The topic comes back with a subscription (a subscriber re-subscribes): what is
        # published before that reaches nobody, so the drain is held while both are made.
        drain.stop()
        thread.join()
        admin.create_topic(request={"name": arrivals_topic})
        pipe.subscribe_arrivals()
        drain = FacilityService(announcer=pipe.service.announcer, every=5.0)
        drain.start()
        took = wait_for(lambda: len(pipe.arrivals) >= CCDS, 60, f"{CCDS} arrivals")
        assert pipe.relay.wait_idle(quiet=2.0, timeout=30)
        time.sleep(6)  # one more drain interval: nothing more may come

        rows = pipe.registry.datasets()
        assert len(rows) == CCDS
        assert sorted(str(a.dataset_id) for a in pipe.arrivals) == sorted(r["id"] for r in rows)
        assert len(pipe.arrivals) == CCDS  # each announced exactly once: no duplicates
        for event in pipe.arrivals:
            assert event.published_time > event.registered_time  # stamped when published
        status = pipe.registry.outbox.status()
        assert (status.pending, status.published) == (0, CCDS)
        assert pipe.relay.stats.dead_lettered == 0 and pipe.dead_letters() == 0
        print(f"{CCDS}/{CCDS} announced {took:.1f} s after the topic came back")
    finally:
        pipe.close()
