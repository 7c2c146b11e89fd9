"""The backfill worker's handling of one file, on the local-directory store (the gs:// path is
tests/integration/test_backfill_gcs_upload.py): stored once and verified, the same bytes again
are "exists", other bytes under the name are a conflict, a vanished source is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsingest.checksums import checksum_str
from producers.backfill.transfer import UploadWorker

pytestmark = pytest.mark.unit


def test_stored_then_exists_then_conflict(tmp_path: Path) -> None:
    src = tmp_path / "a.fits"
    src.write_bytes(b"first version" * 100)
    worker = UploadWorker(f"file://{tmp_path / 'store'}")

    [stored] = worker([("x/a.fits", str(src))])
    assert (stored.ok, stored.status, stored.size) == (True, "stored", 1300)
    assert stored.checksum == checksum_str(src.read_bytes())
    assert worker.one("x/a.fits", str(src)).status == "exists"

    src.write_bytes(b"second version")
    conflict = worker.one("x/a.fits", str(src))
    assert not conflict.ok and not conflict.retriable and conflict.reason == "checksum-conflict"


def test_a_vanished_source_is_named(tmp_path: Path) -> None:
    worker = UploadWorker(f"file://{tmp_path / 'store'}")
    gone = worker.one("x/b.fits", str(tmp_path / "b.fits"))
    assert not gone.ok and gone.reason == "source-vanished" and "b.fits" in gone.error
