"""The assembler process: a new instance after each instance stopped by an outage, the waits
between them doubling while it lasts."""

import signal
from types import SimpleNamespace

import pytest

from functions.assembler import main, service
from functions.assembler.service import StoreUnavailable
from obsingest import logs
from obsingest.retry import RetryPolicy

pytestmark = pytest.mark.unit


def test_the_waits_between_instances_start_again_from_1_s_after_an_instance_that_stored(monkeypatch):
    # after one long outage the wait had reached 30 s and stayed there for the process's life:
    # the next outage, days later, waited up to 30 s before its first restart (5 s budget)
    progress = [False] * 6 + [True, False]  # per instance stopped by the outage: did it finish a file?
    waits: list[float] = []

    class Instance:
        def __init__(self, settings, metrics=None) -> None:
            self.progressed = False

        def run(self, stop, idle_exit_s=None) -> None:
            if progress:  # the last one runs until stopped
                self.progressed = progress.pop(0)
                raise StoreUnavailable("destination disk full")

    class Stop:  # threading.Event, its waits recorded instead of waited
        def set(self) -> None:
            pass

        def is_set(self) -> bool:
            return False

        def wait(self, seconds: float) -> bool:
            waits.append(seconds)
            return False

    monkeypatch.setattr(service, "AssemblerService", Instance)
    monkeypatch.setattr(main, "threading", SimpleNamespace(Event=Stop))
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(logs, "configure", lambda *args: None)
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, retry, rand=None: self.backoff_cap(retry))
    assert main.main(["--bootstrap-servers", "127.0.0.1:1"]) == 0
    assert waits == [1, 2, 4, 8, 16, 30, 1, 2]
