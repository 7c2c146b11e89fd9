"""Every real Rubin header in the shared set (tests/fixtures/real_headers/), written as a FITS file
under the camera's own file name (``MC_O_20250415_000060_R01_S01.fits``), ingests on the real
services, and its identity is computed from the header: the dataset is registered with the data
id (instrument, exposure, detector) Rubin's translator gives, the exposure record carries the
day_obs, seq_num, observation id and group it gives, and the object is the camera's file name in
Rubin's layout. Two ways in:

- through the edge: ``python -m producers.edge`` watching a hand-off directory, direct upload to
  the GCS emulator, its finalize notification over Pub/Sub to the register function, PostgreSQL;
- through the edge over Kafka: chunks, the assembler (which names the object from the assembled
  file's header), a local store's finalize events to the register function;
- through ``obsingest backfill`` into a bucket without notifications, then ``obsingest
  reconcile``, which finds the objects no notification announced and registers them.

A file whose header cannot say which CCD it is is quarantined with the card (at the edge, and by
the register function after a backfill). The exposure record's other fields come from the
translator (``obsingest.registry.headers``) and are compared field by field with Rubin's in its
own tests; here the identity is asserted strictly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from tests.fixtures.camera_files import (
    camera_file_name,
    ccd_file,
    expected_observation_info,
    fits_from_cards,
    real_headers,
)
from tests.integration.fixtures.edge import ROOT, EdgeProcess
from tests.integration.fixtures.handles import GcsService, PostgresServer
from tests.integration.fixtures.pipeline import build_pipeline, wait_for

pytestmark = pytest.mark.integration

HEADERS = real_headers()
EXPECTED = expected_observation_info()
#: a CCD whose header has no RAFTBAY: no detector, whatever its name says
NO_IDENTITY = "MC_O_20250415_000061_R01_S01.fits"


def write_camera_files(root: Path, rename: bool) -> dict[str, Path]:
    """Every real header as a FITS file under its camera name (written to a temporary name and
    renamed, as a DAQ hands over, when ``rename``), plus the one without identity."""
    from obsingest.dataid import DataId

    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    files = [
        (fixture, camera_file_name(EXPECTED[fixture]), fits_from_cards(cards)) for fixture, cards in HEADERS
    ]
    bad = ccd_file(DataId("LSSTCam", 2025041500061, 1), RAFTBAY=None)
    for fixture, name, data in [*files, ("no-identity", NO_IDENTITY, bad)]:
        path = root / name
        if rename:
            tmp = root / f".{name}.part"
            tmp.write_bytes(data)
            tmp.rename(path)
        else:
            path.write_bytes(data)
        paths[fixture] = path
    return paths


def assert_registered_by_header(registry: Registry, prefix: str) -> None:
    """Every real header's CCD registered under its header's identity, in Rubin's layout."""
    datasets = registry.datasets()
    assert len(datasets) == len(HEADERS), [d["uri"] for d in datasets]
    for fixture, _cards in HEADERS:
        want = EXPECTED[fixture]
        instrument, exposure = want["instrument"], want["exposure_id"]
        rows = [d for d in datasets if (d["instrument"], d["exposure"]) == (instrument, exposure)]
        assert [r["detector"] for r in rows] == [want["detector_num"]], fixture
        name = camera_file_name(want)
        layout = f"{prefix}{instrument}/{want['observing_day']}/{want['observation_id']}/{name}"
        assert rows[0]["uri"].endswith(layout), (fixture, rows[0]["uri"])
        record = registry.exposure(instrument, exposure)
        assert record is not None, fixture
        found = {k: record[k] for k in ("day_obs", "seq_num", "obs_id", "group_name")}
        assert found == {
            "day_obs": want["observing_day"],
            "seq_num": want["observation_counter"],
            "obs_id": want["observation_id"],
            "group_name": want["exposure_group"],
        }, fixture


def test_every_real_header_ingests_through_the_edge_under_its_camera_name(
    gcs: GcsService, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    pipe = build_pipeline(postgres_server.admin_url, tag="realhdr")
    handoff = tmp_path / "handoff"
    edge = EdgeProcess(
        handoff, tmp_path / "spool", f"gs://{pipe.bucket}", tmp_path / "logs", None, "--workers", "2"
    )
    try:
        edge.start()
        paths = write_camera_files(handoff / "20250415", rename=True)
        wait_for(
            lambda: pipe.registry.count_datasets() + len(pipe.registry.quarantined()) >= len(HEADERS),
            180,
            "every real header's CCD registered",
        )
        wait_for(
            lambda: (
                (handoff / "quarantine").exists() and any((handoff / "quarantine").rglob("*.reason.json"))
            ),
            60,
            "the edge's quarantine",
        )
        assert pipe.registry.quarantined() == []
        assert_registered_by_header(pipe.registry, "raw/")
        # the CCD whose header says no detector never left the edge: quarantined with the card
        note = next((handoff / "quarantine").rglob(f"{NO_IDENTITY}.reason.json"))
        reason = json.loads(note.read_text())
        assert reason["reason"] == "no-identity" and "no RAFTBAY card" in reason["error"]
        assert not paths["no-identity"].exists()
        stored = sorted(b.name for b in pipe.store.client.list_blobs(pipe.bucket, prefix="raw/"))
        assert all(name.endswith(".fits") for name in stored) and len(stored) == len(HEADERS)
    finally:
        edge.close()
        pipe.close()


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_every_real_header_ingests_through_backfill_and_reconcile(
    gcs: GcsService, postgres: str, tmp_path: Path
) -> None:
    bucket = gcs.new_bucket("realhdr-backfill")  # no notifications: only reconcile registers
    archive = tmp_path / "archive"
    write_camera_files(archive / "2025" / "night 1", rename=False)
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": str(ROOT)}
    backfill = _run(
        [
            sys.executable,
            "-m",
            "producers.backfill",
            str(archive),
            "--to",
            f"gs://{bucket}/raw",
            "--spool",
            str(tmp_path / "spool"),
            "--no-progress",
            "--json",
            str(tmp_path / "report.json"),
        ],
        env,
    )
    assert backfill.returncode == 1, backfill.stdout + backfill.stderr  # the one without identity
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stored"] == len(HEADERS)
    [(key, why)] = report["failed"].items()
    assert key.endswith(NO_IDENTITY) and why.startswith("no-identity:") and "RAFTBAY" in why
    stored = sorted(b.name for b in gcs.client().list_blobs(bucket))
    assert len(stored) == len(HEADERS) and all(n.startswith("raw/") for n in stored)

    env.update(
        OBSINGEST_STORE_URL=f"gs://{bucket}", OBSINGEST_REGISTRY_URL=postgres, OBSINGEST_BUS_BACKEND="memory"
    )
    reconcile = _run(
        [sys.executable, "-m", "obsingest_cli", "reconcile", "--grace", "0", "--no-repair", "--json"], env
    )
    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    registry = Registry.open(RegistrySettings(url=postgres))
    try:
        assert registry.quarantined() == []
        assert_registered_by_header(registry, "raw/")
    finally:
        registry.close()


def test_every_real_header_ingests_through_the_edge_over_kafka(kafka, tmp_path: Path) -> None:
    from functions.register.service import RegisterService
    from obsingest.bus.memory import InMemoryBus
    from obsingest.store.notifications import from_storage_cloudevent
    from tests.integration.test_kafka_path import Deployment

    dep = Deployment(kafka, tmp_path, partitions=1)
    registry = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'registry.sqlite3'}"))
    service = RegisterService(dep.store, registry, InMemoryBus())
    handoff = tmp_path / "handoff"
    url = f"kafka://{dep.kafka.bootstrap_servers}/{dep.topic}"
    edge = EdgeProcess(handoff, tmp_path / "spool", url, tmp_path / "logs")
    try:
        with dep.assembler():
            edge.start()
            write_camera_files(handoff, rename=True)
            wait_for(lambda: dep.notifications() >= len(HEADERS), 180, "every CCD assembled")
        outbox = dep.store.outbox()
        for path, event in outbox.pending():
            outcome = service.handle(from_storage_cloudevent(event, event["data"]))
            assert outcome.status == "registered", (outcome.object_name, outcome.message)
            outbox.ack(path)
        assert registry.quarantined() == []
        assert_registered_by_header(registry, "raw/")
        assert {d["transport"] for d in registry.datasets()} == {"kafka"}
    finally:
        edge.close()
        registry.close()
