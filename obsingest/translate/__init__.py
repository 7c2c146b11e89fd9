"""Header translation: a raw's FITS header to Rubin's observation metadata and its identity.

``observation(header, filename=None) -> Translation`` (``.identity``, ``.info``, ``.warnings``;
``NoIdentity`` when the header does not say which CCD it is) and ``configure(search_path)`` (the
header-correction directories). The translators register on import; where ``lsst.obs.lsst`` is
installed they step aside for Rubin's (``rubin.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from obsingest.translate.bands import band
from obsingest.translate.cards import HduHeader
from obsingest.translate.observe import Identity, NoIdentity, ObservationCache, Translation

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

_cache: ObservationCache | None = None


def configure(search_path: Sequence[str] | None = None) -> ObservationCache:
    """A fresh process-wide cache with these correction directories (None: the setting)."""
    global _cache
    if search_path is None:
        from obsingest.settings import HeaderSettings

        search_path = HeaderSettings().corrections
    _cache = ObservationCache(search_path)  # one assignment: a racing first call just makes two
    return _cache


def observation(header: Mapping[str, Any], filename: str | None = None) -> Translation:
    """``header`` translated, its exposure part cached per exposure (see the module doc)."""
    cache = _cache or configure()
    return cache.observation(header, filename)
