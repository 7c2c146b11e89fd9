"""Backfill: bulk transfer of an archive to the object store, journalled and verified
(``obsingest backfill``, ``producers.backfill.main``; ``run_backfill`` is the library call).
Names resolve lazily so the command line's option module loads without the store clients.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["BackfillConfig", "run_backfill"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'producers.backfill' has no attribute {name!r}")
    return getattr(import_module("producers.backfill.run"), name)
