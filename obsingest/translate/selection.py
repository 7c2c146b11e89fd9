"""Which translators translate: Rubin's own (``lsst.obs.lsst``) where installed, else ours.

Where ``lsst.obs.lsst``'s translators import, they register with astro_metadata_translator and
ours step aside (``can_translate`` False), so ``ObservationInfo(header)`` picks Rubin's. Looked
up once per process (the import is not cheap).
"""

from __future__ import annotations

import importlib
import logging
from functools import cache

log = logging.getLogger(__name__)

#: the module that registers Rubin's translators when imported
RUBIN_TRANSLATORS = "lsst.obs.lsst.translators"


@cache
def rubin_translators_installed() -> bool:
    """True when Rubin's own translators import (and so are registered)."""
    try:
        importlib.import_module(RUBIN_TRANSLATORS)
    except ImportError:
        return False
    except Exception as exc:  # installed but broken: ours are better than none
        log.warning("%s is installed but does not import (%s); using obsingest's", RUBIN_TRANSLATORS, exc)
        return False
    return True
