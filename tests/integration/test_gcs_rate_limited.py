"""A GCS 429/503 storm (and a quota 403) under a running edge, through an HTTP fault proxy in
front of the GCS emulator: kept, retried as an outage with the reason ``rate-limited``, never
quarantined; every CCD stored exactly once when the storm ends (issue 21). A 400 for one
object, though, is that CCD's alone: quarantined, the others sent as if nothing happened."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsingest.dataid import DataId
from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge.journal import Journal
from tests.integration.fixtures.edge import EdgeProcess, wait_for
from tests.integration.fixtures.handles import GcsService
from tests.integration.fixtures.http_fault import HttpFaultProxy

pytestmark = pytest.mark.integration

CCDS = 20
STORM_SECONDS = 8.0


def counts(spool: Path) -> dict[str, int]:
    journal = Journal(spool)
    try:
        return journal.counts()
    finally:
        journal.close()


def test_a_rate_limit_storm_is_ridden_out_every_ccd_stored_once(gcs: GcsService, tmp_path: Path) -> None:
    assert gcs.endpoint, "needs the GCS emulator"
    bucket = gcs.new_bucket("ratelimit")
    proxy = HttpFaultProxy(gcs.endpoint).start()
    handoff, spool = tmp_path / "handoff", tmp_path / "spool"
    handoff.mkdir()
    env = {"STORAGE_EMULATOR_HOST": f"http://{proxy.address}", "OBSINGEST_GCS_MAX_DELAY": "0.2"}
    edge = EdgeProcess(
        handoff,
        spool,
        f"gs://{bucket}",
        tmp_path / "logs",
        env,
        "--workers",
        "2",
        "--retry-max-delay",
        "2",
        "--min-free-mb",
        "1",
    )
    try:
        edge.start()
        proxy.storm([429, 503, 429, 403])
        start = datetime(2026, 11, 22, 3, tzinfo=UTC)
        for i in range(CCDS):
            exposure = 2026112200001 + i // 10
            spec = CcdSpec("LSSTCam", exposure, i % 10, 20261122, start, 30.0, "r", size="small")
            write_raw_ccd(spec, handoff / f"LSSTCam_{exposure}_{i % 10:03d}.fits")
        wait_for(
            lambda: (
                (edge.health() or {}).get("destination", {}).get("exhausted")
                in ("rate-limited", "quota-exceeded")
            ),
            60,
            "the edge to report the rate limit",
        )
        health = edge.health() or {}
        assert health["status"] == "degraded", health
        time.sleep(STORM_SECONDS)
        assert counts(spool)["acked"] == 0 and counts(spool)["quarantined"] == 0
        proxy.calm()
        wait_for(lambda: counts(spool)["acked"] == CCDS, 90, f"all {CCDS} CCDs acknowledged")
    finally:
        edge.close()
        proxy.close()
    assert counts(spool)["quarantined"] == 0
    assert not (handoff / "quarantine").exists()
    assert not edge.events("edge.quarantined")
    reasons = {e["reason"] for e in edge.events("edge.retry")}
    assert reasons <= {"rate-limited", "quota-exceeded", "retries-exhausted"}, reasons
    assert reasons & {"rate-limited", "quota-exceeded"}, reasons
    assert proxy.faulted.get(429) and proxy.faulted.get(503)
    names = [b.name for b in gcs.client().list_blobs(bucket, prefix="raw/")]
    assert len(names) == len(set(names)) == CCDS


def test_a_400_for_one_object_quarantines_that_ccd_alone(gcs: GcsService, tmp_path: Path) -> None:
    """GCS refusing one object's upload (HTTP 400: its name, its metadata) was taken for the
    destination's fault: the whole edge backed off and probed as in an outage, and that CCD
    was retried for ever. It is now quarantined with its reason, the others sent as usual."""
    assert gcs.endpoint, "needs the GCS emulator"
    bucket = gcs.new_bucket("refused")
    proxy = HttpFaultProxy(gcs.endpoint).start()
    exposure, ccds, start = 2026112200001, 6, datetime(2026, 11, 22, 3, tzinfo=UTC)
    refused = DataId("LSSTCam", exposure, 3).identity().file_name
    proxy.refuse(refused.encode())
    handoff, spool = tmp_path / "handoff", tmp_path / "spool"
    handoff.mkdir()
    env = {"STORAGE_EMULATOR_HOST": f"http://{proxy.address}"}
    edge = EdgeProcess(handoff, spool, f"gs://{bucket}", tmp_path / "logs", env, "--min-free-mb", "1")
    try:
        edge.start()
        for detector in range(ccds):
            spec = CcdSpec("LSSTCam", exposure, detector, 20261122, start, 30.0, "r", size="small")
            write_raw_ccd(spec, handoff / f"LSSTCam_{exposure}_{detector:03d}.fits")
        wait_for(lambda: counts(spool)["acked"] == ccds - 1, 60, f"{ccds - 1} CCDs acknowledged")
        wait_for(lambda: counts(spool)["quarantined"] == 1, 30, "the refused CCD quarantined")
    finally:
        edge.close()
        proxy.close()
    (quarantined,) = edge.events("edge.quarantined")
    assert quarantined["reason"] == "store-request-refused" and refused in quarantined["error"]
    assert proxy.faulted == {400: 1}  # refused once: no retry, no outage
    assert not edge.events("edge.retry")
