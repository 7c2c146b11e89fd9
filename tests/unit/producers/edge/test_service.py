"""The edge service through its Python API, on a file:// store (no services): acked outcomes,
duplicates, over-budget reported not dropped, quarantine, the health endpoint (degraded when the
worker pool is not whole), refusing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from obsingest.store.local import LocalDirStore
from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge import CcdFile, EdgeService, EdgeSettings
from producers.edge.errors import SpoolFull

pytestmark = pytest.mark.unit

EXPOSURE = 2026112200011


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeService]:
    root = tmp_path_factory.mktemp("edge")
    settings = EdgeSettings(
        destination=f"file://{root / 'store'}",
        spool=root / "spool",
        workers=1,
        health_port=0,
        min_free_bytes=0,
        budget_seconds=5.0,
    )
    service = EdgeService(settings, log_level="WARNING").start()
    yield service
    service.stop()


def ccd(tmp: Path, detector: int) -> CcdFile:
    spec = CcdSpec("LSSTCam", EXPOSURE, detector, 20261122, datetime.now(UTC), 15.0, "r", "small")
    path = write_raw_ccd(spec, tmp / f"LSSTCam_{EXPOSURE}_{detector:03d}.fits")
    return CcdFile(str(path), "LSSTCam", EXPOSURE, detector, datetime.now(UTC))


def test_a_submitted_ccd_is_stored_and_acked(edge: EdgeService, tmp_path: Path) -> None:
    outcome = edge.submit(ccd(tmp_path, 1)).result(timeout=60)
    assert outcome.ok and outcome.status == "stored" and outcome.attempts == 1
    assert outcome.latency is not None and 0 < outcome.latency < 60
    store = LocalDirStore(edge.settings.destination[len("file://") :])
    assert store.stat(outcome.object_name).size == outcome.size
    again = edge.submit(ccd(tmp_path, 1)).result(timeout=10)  # handed over twice
    assert again.ok and again.object_name == outcome.object_name
    assert edge.counts()["duplicates"] >= 1


def test_a_late_ccd_is_reported_not_dropped(edge: EdgeService, tmp_path: Path) -> None:
    late = ccd(tmp_path, 2)
    late = CcdFile(
        late.path, late.instrument, late.exposure, late.detector, datetime.now(UTC) - timedelta(seconds=60)
    )
    before = edge.counts()["over_budget"]
    outcome = edge.submit(late).result(timeout=60)
    assert outcome.ok and outcome.latency is not None and outcome.latency > 59
    assert edge.counts()["over_budget"] == before + 1
    assert edge.journal is not None and edge.journal.get(outcome.key).over_budget == 1


def test_a_corrupt_file_is_quarantined_with_its_reason(edge: EdgeService, tmp_path: Path) -> None:
    bad = tmp_path / f"LSSTCam_{EXPOSURE}_003.fits"
    bad.write_bytes(b"SIMPLE  = " + b" " * 100)
    outcome = edge.submit(CcdFile(str(bad), "LSSTCam", EXPOSURE, 3)).result(timeout=60)
    assert outcome.state == "quarantined" and outcome.reason == "corrupt-file"
    assert str(bad) in outcome.error
    follow = edge.submit(ccd(tmp_path, 4)).result(timeout=60)
    assert follow.ok  # the worker and the service carry on


def test_health_endpoint_reports_counts(edge: EdgeService) -> None:
    port = int((edge.spool / "health.port").read_text())
    resp = requests.get(f"http://127.0.0.1:{port}/health", timeout=5)
    body = resp.json()
    assert resp.status_code == 200 and body["status"] == "ready"
    assert body["journal"]["acked"] >= 2 and body["journal"]["quarantined"] >= 1
    assert requests.get(f"http://127.0.0.1:{port}/nope", timeout=5).status_code == 404


def test_a_broken_worker_pool_makes_health_degraded(edge: EdgeService, monkeypatch) -> None:
    assert edge.pool is not None and edge.health()["status"] == "ready"
    dead = threading.Thread(target=lambda: None)  # a collector that died: nothing is delivered
    dead.start()
    dead.join()
    monkeypatch.setattr(edge.pool, "_collector", dead)
    health = edge.health()
    assert health["status"] == "degraded"
    assert any(r.startswith("worker-pool: ") and "collector" in r for r in health["reasons"])


def test_below_the_free_space_floor_new_work_is_refused(edge: EdgeService, tmp_path: Path) -> None:
    floor = edge.refusal.min_free_bytes
    edge.refusal.min_free_bytes = 1 << 60
    try:
        with pytest.raises(SpoolFull, match="below"):
            edge.submit(ccd(tmp_path, 5))
        health = edge.health()
        assert health["status"] == "degraded" and health["refusing_new_work"]
        assert any(r.startswith("spool-full") for r in health["reasons"])
    finally:
        edge.refusal.min_free_bytes = floor
    deadline = time.monotonic() + 10
    while edge.refusal.refusing and time.monotonic() < deadline:
        time.sleep(0.1)  # the engine checks twice a second and resumes by itself
    assert edge.health()["status"] == "ready"
    assert edge.submit(ccd(tmp_path, 5)).result(timeout=60).ok


def test_a_whole_readout_is_journalled_at_once(edge: EdgeService, tmp_path: Path) -> None:
    futures = edge.submit_many([ccd(tmp_path, det) for det in (6, 7, 8)])
    outcomes = [f.result(timeout=60) for f in futures]
    assert [o.ok for o in outcomes] == [True, True, True]
    assert [o.key for o in outcomes] == [f"LSSTCam/{EXPOSURE}/{d:03d}" for d in (6, 7, 8)]
