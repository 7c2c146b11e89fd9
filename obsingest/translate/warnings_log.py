"""Warnings a translation logs, captured for the record instead of only printed.

The translators report defaulted cards and uncomputable properties with ``logging`` at WARNING.
One handler on those loggers hands each record to the capture open in the logging thread, so
concurrent translations keep their warnings apart. Silencing those loggers silences the capture.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

#: the loggers whose warnings are a translation's
LOGGERS = ("astro_metadata_translator", "obsingest.translate", "lsst.obs.lsst")

_local = threading.local()


class _Capture(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sink = getattr(_local, "sink", None)
        if sink is not None:
            try:
                sink.append(record.getMessage())
            except Exception:  # a broken format string must not break the translation
                sink.append(str(record.msg))


_handler = _Capture(level=logging.WARNING)


@cache
def _attach() -> None:
    for name in LOGGERS:  # addHandler adds a handler once, so two first calls at once are harmless
        logging.getLogger(name).addHandler(_handler)


@contextmanager
def capture() -> Iterator[list[str]]:
    """Collect, in a list, the WARNING-or-worse messages this thread's translation logs."""
    _attach()
    outer = getattr(_local, "sink", None)
    sink: list[str] = []
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = outer
        if outer is not None:
            outer.extend(sink)
