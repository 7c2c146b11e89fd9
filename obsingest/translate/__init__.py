"""Header translation: a raw's FITS header to Rubin's observation metadata and its identity.

The API the rest of obsingest uses:

- ``observation(header, filename=None) -> Translation``: any ``card -> value`` mapping
  (``cards.HduHeader`` for a parsed header) translated by ``ObservationInfo``, the exposure part
  once per exposure (``observe.ObservationCache``); ``.identity``, ``.info``, ``.warnings``.
  ``NoIdentity`` (reason ``bad-header``) when the header does not say which CCD it is.
- ``configure(search_path)``: the header-correction directories (default
  ``OBSINGEST_HEADER_CORRECTIONS``, read at first use).

The translators (``lsstcam.py``, ``latiss.py``, ``legacy_sim.py`` on ``rubin.py``) register on
import; where ``lsst.obs.lsst`` is installed they step aside for Rubin's (``selection.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from obsingest.translate.bands import band
from obsingest.translate.cards import HduHeader
from obsingest.translate.errors import NoIdentity
from obsingest.translate.observe import Identity, ObservationCache, Translation

__all__ = [
    "HduHeader",
    "Identity",
    "NoIdentity",
    "ObservationCache",
    "Translation",
    "band",
    "configure",
    "observation",
]

_lock = threading.Lock()
_cache: ObservationCache | None = None


def configure(search_path: Sequence[str] | None = None) -> ObservationCache:
    """A fresh process-wide cache with these correction directories (None: the setting)."""
    global _cache
    if search_path is None:
        from obsingest.settings import HeaderSettings

        search_path = HeaderSettings().corrections
    with _lock:
        _cache = ObservationCache(search_path)
        return _cache


def observation(header: Mapping[str, Any], filename: str | None = None) -> Translation:
    """``header`` translated, its exposure part cached per exposure (see the module doc)."""
    cache = _cache or configure()
    return cache.observation(header, filename)
