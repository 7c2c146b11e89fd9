"""``backfill --prefix``: a ``file://DIR`` destination names no prefix, so without it the objects
land outside the ingest prefix (``raw/``) where neither the register function nor ``reconcile``
look; with it they land in Rubin's layout below it."""

from pathlib import Path

import pytest

from obsingest.dataid import DataId
from obsingest.store.local import LocalDirStore
from producers.backfill.run import BackfillConfig, run_backfill
from tests.fixtures.camera_files import ccd_file

pytestmark = pytest.mark.unit


def test_a_file_destination_takes_the_ingest_prefix(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "MC_O_20250415_000060_R01_S01.fits").write_bytes(ccd_file(DataId("LSSTCam", 2025041500060, 1)))
    store = tmp_path / "store"
    config = BackfillConfig(
        [str(archive)], f"file://{store}", tmp_path / "spool", 1, progress=False, prefix="raw"
    )
    report = run_backfill(config)
    assert report.failed == {}
    name = "raw/LSSTCam/20250415/MC_O_20250415_000060/MC_O_20250415_000060_R01_S01.fits"
    assert LocalDirStore(store, notify=False).stat(name).name == name
