"""The DAQ's side of a harness run: every exposure's own CCD files (``fitsheader`` says why),
renamed into the run's hand-off directory and flushed before the first readout, so write-back
never runs while an exposure is measured; ``remove_staged`` frees the disk space.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from obsingest.dataid import DataId, identity_cards
from producers.transfer.fitsheader import retarget_primary_header

#: bytes read to find and rewrite the primary header (it is a few 2880-byte blocks)
HEADER_BYTES = 2880 * 16


def staged_name(instrument: str, exposure: int, detector: int, compressed: bool) -> str:
    """The camera's file name (``MC_O_20261122_000012_R22_S11.fits``; ``.fz`` when the DAQ
    compressed it), as the simulator writes it and the edge takes it."""
    name = DataId(instrument, exposure, detector).identity().file_name
    return name + (".fz" if compressed else "")


def stage_run(
    sources: dict[int, Path],
    directory: Path,
    instrument: str,
    exposures: list[int],
    compressed: bool,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[int, Path]]:
    """Every exposure's files (per exposure index: detector -> path), each written under
    ``.NAME.tmp`` then renamed, and flushed."""
    staged = []
    for index, exposure in enumerate(exposures):
        folder = directory / str(exposure)
        folder.mkdir(parents=True, exist_ok=True)
        files = {}
        for detector, src in sources.items():
            final = folder / staged_name(instrument, exposure, detector, compressed)
            tmp = folder / f".{final.name}.tmp"
            shutil.copyfile(src, tmp)  # in the kernel (sendfile), as fast as copy_file_range here
            with tmp.open("r+b") as fh:
                head = bytearray(fh.read(HEADER_BYTES))
                retarget_primary_header(
                    head, identity_cards(DataId(instrument, exposure, detector).identity())
                )
                fh.seek(0)
                fh.write(head)
            files[detector] = tmp.rename(final)
        staged.append(files)
        if progress:
            progress(index + 1, len(exposures))
    for path in (p for files in staged for p in files.values()):
        with path.open("rb") as fh:
            os.fdatasync(fh.fileno())
    return staged


def remove_staged(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
