"""``obsingest edge release`` and the crash window between returning a CCD and removing its note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from producers.edge.handoff import QUARANTINE_DIR
from producers.edge.release import NOTE_SUFFIX, release_quarantined

pytestmark = pytest.mark.unit


def test_a_note_whose_ccd_was_already_returned_is_removed(tmp_path: Path) -> None:
    """A release killed between moving the CCD back and removing its note left a note that every
    later release listed as skipped; a release (not a dry run) removes it."""
    handoff = tmp_path / "handoff"
    note = handoff / QUARANTINE_DIR / f"LSSTCam_2026112200007_001.fits{NOTE_SUFFIX}"
    note.parent.mkdir(parents=True)
    note.write_text(json.dumps({"reason": "unexpected-error"}))
    [dry] = release_quarantined(handoff, tmp_path / "spool", dry_run=True)
    assert dry.status == "skipped" and "is gone" in dry.why and note.exists()
    [done] = release_quarantined(handoff, tmp_path / "spool")
    assert done.status == "skipped" and not note.exists()
    assert release_quarantined(handoff, tmp_path / "spool") == []
