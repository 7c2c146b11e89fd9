"""Edge settings refused at start-up (exit 2) rather than misbehaving all night."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from producers.edge.settings import EdgeSettings

pytestmark = pytest.mark.unit


def test_a_done_dir_inside_the_watched_hand_off_is_refused(tmp_path: Path) -> None:
    """--on-ack move --done-dir HANDOFF/archive: the intake found every moved file again, a
    second file of a CCD whose first was gone, and quarantined it as a checksum conflict (an
    ERROR per CCD, the night's raw files in HANDOFF/quarantine instead of the done directory)."""
    handoff = tmp_path / "handoff"
    with pytest.raises(ValidationError, match=r"inside the hand-off directory"):
        EdgeSettings(handoff=handoff, on_ack="move", done_dir=handoff / "archive")
    for done in (handoff / "done" / "night", tmp_path / "done"):  # the edge's own, or outside
        assert EdgeSettings(handoff=handoff, on_ack="move", done_dir=done).done_dir == done
