"""A SIGTERM ends a process as Ctrl-C does (KeyboardInterrupt), once: its ``finally`` blocks and
fixtures stop what it started, instead of dying at once and leaving its services (each in a
session of its own, out of reach of the group's signal) running, orphaned. ``.ci/run`` passes a
cancelled run's SIGTERM to the whole process group. Used by the test sessions
(``tests/conftest.py``), the chaos lanes (``python -m tests.chaos``) and the soak.

A forked child of the process still dies of SIGTERM at once; a second SIGTERM (the group's and
the parent's) is ignored while the teardown runs."""

from __future__ import annotations

import os
import signal
from types import FrameType

#: the process that installed the handler, and again once it has been interrupted
_OWNER: list[int] = []


def _terminated(signum: int, frame: FrameType | None) -> None:
    if os.getpid() not in _OWNER:  # a forked child: ends as it would have
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _OWNER.count(os.getpid()) > 1:
        return  # a second SIGTERM: the teardown runs already
    _OWNER.append(os.getpid())
    raise KeyboardInterrupt(f"SIGTERM (signal {signum})")


def interrupt_on_sigterm() -> None:
    """Install the handler for this process (call it from the main thread)."""
    _OWNER[:] = [os.getpid()]
    signal.signal(signal.SIGTERM, _terminated)


def restore() -> None:
    """Put SIGTERM's default back, if this module's handler is the one installed."""
    if signal.getsignal(signal.SIGTERM) is _terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _OWNER.clear()
