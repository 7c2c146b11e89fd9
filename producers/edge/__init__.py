"""The edge as a service: take the DAQ's CCDs, journal them, compress, send, resume after any crash.

``EdgeService`` (``service``) is the long-running process behind ``obsingest edge`` /
``python -m producers.edge`` and the in-process API a DAQ, the demo and ``bench transfer`` call.
Its parts: ``journal`` (SQLite WAL in the spool directory: every CCD's state), ``handoff`` (the
DAQ's hand-off directory: watcher, start-up scan, completeness rule), ``scheduler`` (newest
exposure first, destination backoff), ``worker`` (crash-isolated worker processes), ``ccd`` (what
a worker does to one CCD), ``health`` (HTTP JSON), ``stats`` (counts). ``ship`` (``ship_ccd``,
one-shot) is only the reference ``benchmarks/edge.py`` compares the service against.

Names are resolved lazily (PEP 562) so ``producers.edge.main`` (command-line options) can be
imported by ``obsingest --help`` without loading numpy and the codec.
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
