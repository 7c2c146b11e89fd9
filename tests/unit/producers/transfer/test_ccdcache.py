"""The transfer harness's CCD cache: reused by every run, and never more than every detector's
pair once per size."""

from __future__ import annotations

from pathlib import Path

import pytest

from producers.transfer.ccdcache import ccd_paths, ensure_ccd_files

pytestmark = pytest.mark.unit


def test_files_no_detector_is_named_now_are_pruned(tmp_path: Path) -> None:
    """The cache kept an older version's files (its names were LSSTCam_000.fits) and a killed
    run's temp files for good: each renaming left another night's worth (~17 GB full size)
    behind. Now what no detector is named goes; every detector's current pair stays, used by
    this run or not (a later run with more CCDs reuses it)."""
    used, other = ccd_paths(tmp_path, "small", 0), ccd_paths(tmp_path, "small", 5)
    for path in (*used, *other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"cached")  # present: nothing to generate
    stale = [tmp_path / "small" / name for name in ("LSSTCam_000.fits", f".{used[0].name}.x1y2.tmp")]
    for path in stale:
        path.write_bytes(b"stale")
    (tmp_path / "small" / "old-layout").mkdir()

    assert ensure_ccd_files(tmp_path, "small", [0]) == {0: used}
    assert sorted(p.name for p in (tmp_path / "small").iterdir()) == sorted(
        [".lock", *(p.name for p in (*used, *other))]
    )
    assert used[0].read_bytes() == b"cached"  # reused, not generated again
