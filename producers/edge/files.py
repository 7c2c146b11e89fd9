"""What the edge does to files in the hand-off directory: read manifests, move bad files aside,
release raw files once acknowledged. Only files inside it are touched: a DAQ calling the Python
API keeps its own files."""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from obsingest.checksums import checksum_str
from obsingest.errors import ChecksumConflict, ObsIngestError
from obsingest.logs import get_logger, log_event
from obsingest.messages import ExposureManifest
from producers.edge.errors import BadManifest
from producers.edge.handoff import DONE_DIR, QUARANTINE_DIR
from producers.edge.journal import Entry
from producers.edge.settings import EdgeSettings

log = get_logger("obsingest.edge")


def read_manifest(path: Path) -> ExposureManifest | None:
    """The ExposureManifest in ``path`` (None if it vanished); BadManifest if it is not one."""
    try:
        doc = json.loads(path.read_text())
        return ExposureManifest(
            instrument=str(doc["instrument"]),
            exposure=int(doc["exposure"]),
            day_obs=int(doc["day_obs"]),
            detectors=[int(d) for d in doc["detectors"]],
            obs_start=datetime.fromisoformat(doc["obs_start"]),
            exposure_time=float(doc["exposure_time"]),
            filter=str(doc["filter"]),
            published=datetime.fromisoformat(doc.get("published") or doc["obs_start"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadManifest(f"{path}: not an ExposureManifest as JSON: {exc!r}") from None


def manifest_json(manifest: ExposureManifest) -> str:
    """An ExposureManifest as the JSON the edge reads (and the simulated DAQ writes)."""
    return json.dumps(manifest.to_record(), default=datetime.isoformat)


def readout_from_manifest(text: str) -> float:
    """End of exposure (epoch seconds) from a journalled manifest: the CCDs' readout time."""
    doc = json.loads(text)
    start = datetime.fromisoformat(doc["obs_start"])
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return (start + timedelta(seconds=float(doc["exposure_time"]))).timestamp()


def move_to_quarantine(
    handoff: Path | None,
    path: Path,
    error: ObsIngestError,
    sidecar: Path | str | None = None,
    note: bool = True,
) -> None:
    """``HANDOFF/quarantine/<same relative path>`` plus ``<name>.reason.json``; then its
    sidecar, if any, without a note."""
    if handoff is not None and path.resolve().is_relative_to(handoff) and path.exists():
        target = handoff / QUARANTINE_DIR / path.resolve().relative_to(handoff)
        reason = {"reason": error.reason, "error": str(error), "file": str(path)}
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            if note:
                reason["time"] = datetime.now(UTC).isoformat()
                target.with_name(target.name + ".reason.json").write_text(json.dumps(reason, indent=1) + "\n")
        except OSError as exc:
            log_event(log, "edge.quarantine_move_failed", logging.WARNING, path=str(path), error=str(exc))
    if sidecar:
        move_to_quarantine(handoff, Path(sidecar), error, note=False)


def release_raw(handoff: Path, settings: EdgeSettings, paths: list[str]) -> None:
    """``on_ack`` ``delete`` or ``move`` (to ``done_dir``, default HANDOFF/done) of a CCD's raw
    file and sidecar, once its acknowledgement is durable in the journal."""
    if settings.on_ack == "keep":
        return
    for name in paths:
        path = Path(name)
        if not path.resolve().is_relative_to(handoff):
            continue
        try:
            if settings.on_ack == "delete":
                path.unlink(missing_ok=True)
            elif path.exists():
                target = Path(settings.done_dir or handoff / DONE_DIR) / path.resolve().relative_to(handoff)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
        except OSError as exc:
            log_event(log, "edge.after_ack_failed", logging.WARNING, path=str(path), error=str(exc))


def second_file(path: Path, first: Entry) -> ChecksumConflict | None:
    """A second hand-off file ``path`` for the CCD the journal has from ``first.source``: None
    when both hold the same bytes (or the second vanished), else a ChecksumConflict naming both
    files and checksums, also when the first is gone (the stored checksum is of compressed
    bytes): a second file is never sent over the first, a person decides."""
    try:
        second = checksum_str(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return ChecksumConflict(
            f"{first.key}: a second file {path} beside the first "
            f"{first.source}, unreadable ({exc.strerror or exc})"
        )
    sent = f"sent as {first.object}" if first.object else f"journalled ({first.state})"
    try:
        original = checksum_str(Path(first.source).read_bytes())
    except OSError:
        return ChecksumConflict(
            f"{first.key}: a second file {path} ({second}); the first, {first.source}, {sent}, "
            f"is gone and cannot be compared (stored checksum {first.checksum or 'unknown'} is "
            "of its compressed bytes): not sent over it"
        )
    if original == second:
        return None
    return ChecksumConflict(
        f"{first.key}: a second file {path} ({second}) with other bytes than the first, "
        f"{first.source} ({original}), {sent}: not sent over it"
    )
