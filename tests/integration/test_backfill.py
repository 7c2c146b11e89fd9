"""A backfill of 1,000 small camera files to the GCS emulator, SIGKILLed part-way and rerun: every
file in the bucket exactly once, under the name its header gives (Rubin's layout below the
prefix, whatever the file's name on disk), verified by checksum; nothing stored before the kill
re-uploaded."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import google_crc32c
import pytest

from obsingest.dataid import DataId, make_exposure_id
from producers.edge.journal import Entry, Journal, State
from tests.fixtures.camera_files import ccd_file
from tests.integration.fixtures.edge import ROOT, wait_for
from tests.integration.fixtures.handles import GcsService

pytestmark = pytest.mark.integration

FILES = 1000


def make_archive(root: Path) -> dict[str, tuple[bytes, str]]:
    """{path in the archive: (bytes, object name below the prefix its header gives)}: CCDs of
    LSSTCam (205 an exposure) under names that say nothing."""
    rng = random.Random(7)
    files = {}
    for i in range(FILES):
        rel = f"2025{i % 12 + 1:02d}/{i % 7}/file-{i:04d}.fits"
        data_id = DataId("LSSTCam", make_exposure_id(20250415, i // 205 + 1), i % 205)
        data = ccd_file(data_id, pixels=rng.randbytes(1024))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[rel] = (data, data_id.object_name(prefix=""))
    return files


def acked(spool: Path) -> int:
    journal = Journal(spool, name="backfill.sqlite3")
    try:
        return journal.counts()["acked"]
    finally:
        journal.close()


def settled_listing(client: Any, bucket: str) -> dict[str, int]:
    """{name: generation} once two listings 0.5 s apart agree: an upload whose body reached the
    emulator before the SIGKILL may still be committed after it, and would otherwise count as
    uploaded again by the rerun."""
    listing = {b.name: b.generation for b in client.list_blobs(bucket)}
    for _ in range(20):
        time.sleep(0.5)
        again = {b.name: b.generation for b in client.list_blobs(bucket)}
        if again == listing:
            return listing
        listing = again
    raise AssertionError(f"the bucket kept changing after the backfill was killed: {len(listing)}")


def crc_b64(data: bytes) -> str:
    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()


def test_a_killed_backfill_rerun_uploads_every_file_once_verified(gcs: GcsService, tmp_path: Path) -> None:
    files = make_archive(tmp_path / "archive")
    bucket = gcs.new_bucket("backfill")
    spool = tmp_path / "spool"
    cmd = [
        sys.executable,
        "-m",
        "producers.backfill",
        str(tmp_path / "archive"),
        "--to",
        f"gs://{bucket}/archive",
        "--spool",
        str(spool),
        "--parallel",
        "4",
        "--batch",
        "4",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        [*cmd, "--json", str(tmp_path / "first.json")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: spool.exists() and acked(spool) >= 300, 120, "300 files verified")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    assert not (tmp_path / "first.json").exists()  # it really died mid-run
    client = gcs.client()
    before = settled_listing(client, bucket)
    assert 300 <= len(before) < FILES

    second = subprocess.run(
        [*cmd, "--json", str(tmp_path / "second.json")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "uploaded and verified" in second.stdout and "Gbit/s" in second.stdout
    report = json.loads((tmp_path / "second.json").read_text())
    assert report["failed"] == {}
    assert report["already_done"] + report["stored"] + report["exists"] == FILES
    # files stored before the kill were not uploaded again; the rest were uploaded once
    assert report["stored"] == FILES - len(before)
    blobs = {b.name: b for b in client.list_blobs(bucket)}
    assert set(blobs) == {f"archive/{name}" for _data, name in files.values()}
    first_ccd = "LSSTCam/20250415/MC_O_20250415_000001/MC_O_20250415_000001_R01_S00.fits"
    assert f"archive/{first_ccd}" in blobs
    for name, generation in before.items():
        assert blobs[name].generation == generation, name
    for rel, (data, name) in files.items():
        blob = blobs[f"archive/{name}"]
        assert blob.size == len(data) and blob.crc32c == crc_b64(data), rel
    assert acked(spool) == FILES

    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already done (journal)" in again.stdout
    assert {b.name: b.generation for b in client.list_blobs(bucket)} == {
        n: b.generation for n, b in blobs.items()
    }


def test_a_lost_journal_commit_means_re_verification_not_a_double_upload_or_a_loss(
    gcs: GcsService, tmp_path: Path
) -> None:
    """The journal commits a batch of results at a time with ``synchronous=NORMAL``: a crash
    (power cut) can lose the last commits. Modelled here by putting rows back to the state they
    had before: files whose ``acked`` was lost (their objects are in the store) and files whose
    ``sent`` survived but whose upload never reached the store. The rerun must verify the first
    against the store without uploading them again and upload the second once."""
    from producers.backfill import BackfillConfig, run_backfill

    archive = tmp_path / "archive"
    files = dict(list(make_archive(archive).items())[:60])
    for path in archive.rglob("*"):
        if path.is_file() and path.relative_to(archive).as_posix() not in files:
            path.unlink()
    bucket = gcs.new_bucket("backfill-lost")
    spool = tmp_path / "spool"
    config = BackfillConfig([str(archive)], f"gs://{bucket}/a", spool, parallel=2, batch=4, progress=False)
    first = run_backfill(config)
    assert first.failed == {} and first.stored == 60
    client = gcs.client()
    generations = {b.name: b.generation for b in client.list_blobs(bucket)}

    # journalled by where each file is; the object it went to is in the journal too
    keys = sorted(f"a/{rel}" for rel in files)
    journal = Journal(spool, name="backfill.sqlite3")
    try:
        objects = {key: cast(Entry, journal.get(key)).object for key in keys}
        ack_lost, never_arrived = keys[:20], keys[20:30]
        lost: list[tuple[str, State | None, dict[str, Any]]] = [
            (key, "sent", {"acked_at": None, "status": None}) for key in keys[:30]
        ]
        journal.mark_many(lost)
    finally:
        journal.close()
    assert set(objects.values()) == set(generations)
    for key in never_arrived:
        client.bucket(bucket).blob(objects[key]).delete()

    second = run_backfill(config)
    assert second.failed == {}
    assert second.already_done == 30
    assert second.exists == len(ack_lost)  # verified against the store, not uploaded again
    assert second.stored == len(never_arrived)  # uploaded once
    blobs = {b.name: b for b in client.list_blobs(bucket)}
    assert set(blobs) == {f"a/{name}" for _data, name in files.values()}
    for key, name in objects.items():
        if key not in never_arrived:
            assert blobs[name].generation == generations[name], name
    for rel, (data, name) in files.items():
        blob = blobs[f"a/{name}"]
        assert blob.size == len(data) and blob.crc32c == crc_b64(data), rel
    assert acked(spool) == 60
