"""The edge killed with SIGKILL three times during a 300-CCD night and restarted: every CCD
stored and registered exactly once, none lost (real GCS emulator, Pub/Sub, relay, register
function, PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from producers.daq.night import NightPlan, play_night
from tests.integration.fixtures.edge import (
    EdgeProcess,
    gcs_facility,
    journal_counts,
    journal_items,
    wait_for,
)
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService

pytestmark = pytest.mark.integration

EXPOSURES, DETECTORS = 30, 10


def test_sigkill_three_times_during_a_night_loses_nothing_and_doubles_nothing(
    gcs: GcsService, pubsub: PubSubService, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    env, arrivals = gcs_facility(tmp_path / "facility")
    edge = EdgeProcess(tmp_path / "handoff", tmp_path / "spool", env.store_url, tmp_path / "logs",
                       None, "--workers", "2", "--rescan-interval", "5")  # fmt: skip
    night_done = threading.Event()
    try:
        edge.start()
        plan = NightPlan(tmp_path / "handoff", "LSSTCam", EXPOSURES, DETECTORS, interval=0.5,
                         size="small", day_obs=20261122, first_seq=100)  # fmt: skip
        night = threading.Thread(target=lambda: (play_night(plan), night_done.set()))
        night.start()
        kills = []
        for _ in range(3):
            before = journal_counts(edge.spool)["acked"]
            wait_for(lambda b=before: journal_counts(edge.spool)["acked"] >= b + 25, 120,
                     "the edge to make progress before the next kill")  # fmt: skip
            counts = journal_counts(edge.spool)
            kills.append(counts)
            edge.kill9()
            edge.start()
        night.join(timeout=120)
        assert night_done.is_set()
        total = EXPOSURES * DETECTORS
        wait_for(lambda: journal_counts(edge.spool)["acked"] == total, 150,
                 f"all {total} CCDs acknowledged")  # fmt: skip
        assert edge.terminate() == 0  # SIGTERM: drains and exits cleanly
        env.finish(timeout=120)
        counts = journal_counts(edge.spool)
        assert counts["acked"] == total and counts["quarantined"] == 0
        # killed mid-flight: the journal had CCDs in every stage when the kills came
        assert any(k["seen"] + k["compressed"] + k["sent"] > 0 for k in kills), kills
        # every CCD registered exactly once: one dataset, one announcement each
        assert env.registry.count_datasets() == total
        announced = Counter(arrivals.keys())
        assert len(announced) == total and set(announced.values()) == {1}, announced
        assert env.registry.quarantined() == []
        # resends after a kill found their own bytes already stored: "exists", never a conflict
        statuses = Counter(item.status for item in journal_items(edge.spool))
        assert set(statuses) <= {"stored", "exists"} and statuses["stored"] >= total - 10
        resumed = [e for e in edge.events("edge.resumed_from_journal")]
        assert len(resumed) >= 1  # at least one restart found unacknowledged CCDs to resume
    finally:
        edge.close()
        env.close()
