"""The backfill worker's handling of one file, on the local-directory store (the gs:// path is
tests/integration/test_backfill_gcs_upload.py): stored once under the name its header gives and
verified, the same bytes again are "exists", other bytes of the same CCD are a conflict, a
vanished source is named, a file that says no CCD fails with the card."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from producers.backfill.transfer import UploadWorker
from tests.fixtures.camera_files import ccd_file

pytestmark = pytest.mark.unit

DID = DataId("LSSTCam", 2025041500060, 1)


def test_stored_then_exists_then_conflict(tmp_path: Path) -> None:
    src = tmp_path / "a.fits"
    src.write_bytes(ccd_file(DID))
    worker = UploadWorker(f"file://{tmp_path / 'store'}", "archive/")

    [stored] = worker([("x/a.fits", str(src))])
    name = "archive/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000060_R01_S01.fits"
    assert (stored.ok, stored.status, stored.size) == (True, "stored", src.stat().st_size)
    assert stored.key == "x/a.fits" and stored.object == name
    assert (tmp_path / "store" / name).read_bytes() == src.read_bytes()
    assert stored.checksum == checksum_str(src.read_bytes())
    assert worker.one("x/a.fits", str(src)).status == "exists"

    src.write_bytes(ccd_file(DID, FILTER="g_6"))
    conflict = worker.one("x/a.fits", str(src))
    assert not conflict.ok and not conflict.retriable and conflict.reason == "checksum-conflict"


def test_a_file_that_says_no_ccd_fails_with_its_reason(tmp_path: Path) -> None:
    worker = UploadWorker(f"file://{tmp_path / 'store'}", "archive/")
    src = tmp_path / "flat.fits"
    src.write_bytes(ccd_file(DID, CCDSLOT=None))
    failed = worker.one("x/flat.fits", str(src))
    assert not failed.ok and not failed.retriable and failed.reason == "no-identity"
    assert failed.error.startswith(f"{src}: header has no CCDSLOT card")
    src.write_bytes(b"not FITS" * 400)
    failed = worker.one("x/flat.fits", str(src))
    assert failed.reason == "corrupt-file" and failed.error.startswith(f"{src}: not a FITS")
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.fits"))


def test_a_vanished_source_is_named(tmp_path: Path) -> None:
    worker = UploadWorker(f"file://{tmp_path / 'store'}")
    gone = worker.one("x/b.fits", str(tmp_path / "b.fits"))
    assert not gone.ok and gone.reason == "source-vanished" and "b.fits" in gone.error


def test_a_fifo_in_the_archive_fails_instead_of_hanging_its_worker(tmp_path: Path) -> None:
    """A named pipe (or device) among the files: reading it waited for a writer for ever, its
    worker held its batch and the backfill never ended nor reported."""
    import os
    import threading

    fifo = tmp_path / "pipe.fits"
    os.mkfifo(fifo)
    worker = UploadWorker(f"file://{tmp_path / 'store'}")
    out: list = []
    reader = threading.Thread(target=lambda: out.append(worker.one("x/pipe.fits", str(fifo))), daemon=True)
    reader.start()
    reader.join(timeout=60)  # a guard against the hang, not a measurement
    try:
        assert not reader.is_alive(), "the worker is still waiting on the FIFO"
        [failed] = out
        assert not failed.ok and not failed.retriable and failed.reason == "not-a-file"
        assert failed.error == f"{fifo}: not a regular file"
    finally:
        if reader.is_alive():  # let it go
            with open(fifo, "wb"):
                pass
