"""The destination unreachable for 30 s mid-night (toxiproxy between the edge and the GCS
emulator cuts the link): nothing lost, the backlog drains, newest exposure first."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

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
from tests.integration.fixtures.toxiproxy import Toxiproxy

pytestmark = pytest.mark.integration

EXPOSURES, DETECTORS, OUTAGE = 16, 4, 30.0


def test_a_30_second_outage_loses_nothing_and_drains_newest_first(
    gcs: GcsService, pubsub: PubSubService, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    toxiproxy = Toxiproxy(tmp_path / "toxiproxy.log")
    env, arrivals = gcs_facility(tmp_path / "facility")
    assert gcs.endpoint is not None
    proxy = toxiproxy.proxy("gcs", urlsplit(gcs.endpoint).netloc)
    edge = EdgeProcess(tmp_path / "handoff", tmp_path / "spool", env.store_url, tmp_path / "logs",
                       {"STORAGE_EMULATOR_HOST": f"http://{proxy.address}"},
                       "--workers", "2", "--retry-max-delay", "2")  # fmt: skip
    total = EXPOSURES * DETECTORS
    try:
        edge.start()
        plan = NightPlan(tmp_path / "handoff", "LSSTCam", EXPOSURES, DETECTORS, interval=2.0,
                         size="small", day_obs=20261122, first_seq=300)  # fmt: skip
        night = threading.Thread(target=play_night, args=(plan,))
        night.start()
        wait_for(lambda: journal_counts(edge.spool)["acked"] >= 2 * DETECTORS, 60,
                 "the first exposures to go through")  # fmt: skip
        proxy.disable()
        down_at = time.time()
        degraded = []
        while time.time() - down_at < OUTAGE:
            health = edge.health() or {}
            if health.get("status") == "degraded":
                degraded.append(health)
            time.sleep(1.0)
        acked_during = [i for i in journal_items(edge.spool)
                        if i.acked_at and down_at + 6 < i.acked_at]  # fmt: skip
        proxy.enable()
        up_at = time.time()
        night.join(timeout=60)
        wait_for(lambda: journal_counts(edge.spool)["acked"] == total, 120,
                 f"all {total} CCDs acknowledged after the outage")  # fmt: skip
        assert edge.terminate() == 0
        env.finish(timeout=120)

        # the outage was real and seen: nothing got through, the health said why
        assert acked_during == []
        assert degraded and any("destination-unreachable" in r for h in degraded
                                for r in h["reasons"])  # fmt: skip
        assert edge.events("edge.retry")
        # nothing lost, nothing doubled
        counts = journal_counts(edge.spool)
        assert counts["acked"] == total and counts["quarantined"] == 0
        assert env.registry.count_datasets() == total
        announced = Counter(arrivals.keys())
        assert len(announced) == total and set(announced.values()) == {1}
        # newest first: of the backlog waiting at recovery, the newest exposure went first
        items = journal_items(edge.spool)
        backlog = sorted((i for i in items if i.seen_at < up_at and i.acked_at >= up_at),
                         key=lambda i: i.acked_at)  # fmt: skip
        exposures = sorted({i.priority for i in backlog})
        assert len(exposures) >= 10, exposures  # a real backlog: many exposures waited
        assert backlog[0].priority == exposures[-1]
        first_done = {e: min(i.acked_at for i in backlog if i.priority == e) for e in exposures}
        newest, oldest = exposures[-2:], exposures[:2]
        assert max(first_done[e] for e in newest) < min(first_done[e] for e in oldest)
        # it drained at full speed, not one probe at a time
        drain = max(i.acked_at for i in backlog) - up_at
        assert drain < 30, drain
    finally:
        edge.close()
        env.close()
        toxiproxy.close()
