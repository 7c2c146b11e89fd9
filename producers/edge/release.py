"""Release quarantined CCDs back into the hand-off directory: ``obsingest edge release``
(producers/edge/README.md). Order, for a crash at any point: the journal first (a pending entry
whose file is still in quarantine is taken back by the next release), then the sidecar, the CCD,
its note.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from obsingest.errors import PermanentError
from producers.edge.errors import SourceUnreadable, SourceVanished
from producers.edge.handoff import QUARANTINE_DIR, classify
from producers.edge.identity import handoff_identity
from producers.edge.journal import Journal

#: the reason a release takes by default: what older edges called a full disk
DEFAULT_REASONS = ("unexpected-error",)
NOTE_SUFFIX = ".reason.json"


@dataclass(frozen=True)
class Released:
    """One quarantined file considered, and what became of it (``why`` it was skipped)."""

    path: Path
    key: str
    reason: str
    status: Literal["released", "would-release", "skipped"]
    why: str = ""


def release_quarantined(
    handoff: Path, spool: Path, reasons: Iterable[str] = DEFAULT_REASONS, dry_run: bool = False
) -> list[Released]:
    """Release every CCD quarantined under ``handoff`` for one of ``reasons``; what was done
    with each (files quarantined for other reasons are not listed)."""
    handoff = Path(handoff).resolve()
    wanted = set(reasons)
    quarantine = handoff / QUARANTINE_DIR
    if not quarantine.is_dir():
        return []
    journal = None if dry_run else Journal(Path(spool))
    out: list[Released] = []
    try:
        for note in sorted(quarantine.rglob(f"*{NOTE_SUFFIX}")):
            reason = _reason_of(note)
            if reason not in wanted:
                continue
            out.append(_release_one(handoff, quarantine, note, reason, journal))
    finally:
        if journal is not None:
            journal.close()
    return out


def _reason_of(note: Path) -> str:
    try:
        return str(json.loads(note.read_text()).get("reason", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _release_one(
    handoff: Path, quarantine: Path, note: Path, reason: str, journal: Journal | None
) -> Released:
    parked = note.with_name(note.name.removesuffix(NOTE_SUFFIX))
    original = handoff / parked.relative_to(quarantine)
    kind = classify(original)
    key = ""

    def skipped(why: str) -> Released:
        return Released(original, key, reason, "skipped", why)

    if kind != "ccd":
        return skipped("not a CCD file name: only CCDs are released")
    if not parked.exists():
        if journal is not None:  # released by a run killed before it removed the note
            note.unlink(missing_ok=True)
        return skipped(f"{parked} is gone")
    try:  # which CCD it is comes from its header, as when the edge first took it
        key = handoff_identity(parked).data_id.key
    except (PermanentError, SourceVanished, SourceUnreadable) as exc:
        return skipped(f"its header names no CCD: {exc}")
    if original.exists():
        return skipped(f"{original} exists already (handed over again?)")
    if journal is None:
        return Released(original, key, reason, "would-release")
    entry = journal.get(key)
    if entry is not None and entry.state == "acked":
        return skipped("the journal says it was acknowledged")
    if entry is not None:
        journal.mark(key, "seen", durable=True, reason=None, error=None, attempts=0)
        _return_sidecar(handoff, quarantine, entry.sidecar)
    os.replace(parked, original)  # the rename the edge watches for
    note.unlink(missing_ok=True)
    return Released(original, key, reason, "released")


def _return_sidecar(handoff: Path, quarantine: Path, sidecar: str | None) -> None:
    """The CCD's header sidecar back beside it (moved to quarantine with it, without a note)."""
    if not sidecar:
        return
    path = Path(sidecar)
    try:
        parked = quarantine / path.relative_to(handoff)
    except ValueError:  # not in the hand-off directory: the edge never moved it
        return
    if parked.exists() and not path.exists():
        os.replace(parked, path)
