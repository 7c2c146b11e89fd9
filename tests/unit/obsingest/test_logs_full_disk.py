"""A log whose disk is full drops its lines, says so once, and prints no traceback per line;
any other logging failure is still reported as before (issue 21)."""

from __future__ import annotations

import errno
import io
import logging

import pytest

from obsingest import logs

pytestmark = pytest.mark.unit


class FullDisk(io.StringIO):
    def __init__(self, error: int = errno.ENOSPC) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise OSError(self.error, errno.errorcode[self.error])


def test_lines_a_full_disk_cannot_take_are_dropped_said_once(capsys, monkeypatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr("sys.__stderr__", stderr)
    monkeypatch.setattr(logging, "raiseExceptions", True)
    logs.configure(stream=FullDisk())
    try:
        log = logs.get_logger("obsingest.test")
        for _ in range(5):
            logs.log_event(log, "edge.retry", logging.WARNING, reason="destination-full")
    finally:
        logs.configure()
    assert "Traceback" not in capsys.readouterr().err
    assert stderr.getvalue().count("log lines dropped") == 1


def test_another_logging_failure_is_still_reported(capsys, monkeypatch) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", True)
    logs.configure(stream=FullDisk(errno.EBADF))
    try:
        logs.log_event(logs.get_logger("obsingest.test"), "x")
    finally:
        logs.configure()
    assert "Logging error" in capsys.readouterr().err
