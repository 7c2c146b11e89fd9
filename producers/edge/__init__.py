"""The edge as a service: take the DAQ's CCDs, journal them, compress, send, resume after any crash.

Names resolve lazily (PEP 562) so ``obsingest --help`` can import ``producers.edge.main`` without
loading numpy and the codec.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "CcdFile": "producers.edge.ccd",
    "Outcome": "producers.edge.ccd",
    "EdgeService": "producers.edge.service",
    "EdgeSettings": "producers.edge.settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'producers.edge' has no attribute {name!r}")
    return getattr(import_module(module), name)
