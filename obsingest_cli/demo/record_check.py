"""Whether the datasets the demo announced are what the registry of record (for ``butler:``,
the Butler) holds; the demo exits non-zero, saying why, when they differ."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def discrepancy(registry: Any, exposures: Iterable[tuple[str, int]], announced: Iterable[Any]) -> str:
    """ "" when the registry holds exactly the announced datasets of ``exposures``, else why not."""
    held: set[str] = set()
    for instrument, exposure in sorted(set(exposures)):
        held.update(str(row["id"]) for row in registry.datasets(instrument, exposure))
    said = {str(a.dataset_id) for a in announced}
    source = "the Butler" if type(registry).__name__ == "ButlerRegistry" else "the registry"
    problems = []
    if said - held:
        problems.append(f"{len(said - held)} announced CCD(s) that {source} does not hold")
    if held - said:
        problems.append(f"{len(held - said)} CCD(s) {source} holds that were never announced")
    if not problems:
        return ""
    return f"{source} holds {len(held)} CCD(s), {len(said)} were announced: " + "; ".join(problems)
