"""A test session that gets SIGTERM tears its session fixtures down (``tests/conftest.py``), as
on Ctrl-C: the services a session started are stopped by that session, not left running for the
next run in the same checkout. A forked child of the session still dies of SIGTERM at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

SESSION = """
import os, signal, time
from pathlib import Path
import pytest

OUT = Path(os.environ["OUT"])

@pytest.fixture(scope="session")
def service():
    yield
    (OUT / "torn-down").write_text("yes")

def test_long(service):
    child = os.fork()
    if child == 0:  # says it runs: a signal before Python's after-fork step in the child is lost
        (OUT / "child-ready").write_text("yes")
        time.sleep(60)
        os._exit(0)
    (OUT / "child").write_text(str(child))
    (OUT / "ready").write_text("yes")
    time.sleep(60)
"""


def test_sigterm_tears_the_session_down_and_a_forked_child_still_dies(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_session.py"),
        ],
        cwd=ROOT,
        # the project's conftest alone, not every installed plugin (seconds of imports)
        env={**os.environ, "OUT": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ((tmp_path / "ready").exists() and (tmp_path / "child-ready").exists()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout
            time.sleep(0.05)
        child = int((tmp_path / "child").read_text())
        os.kill(child, signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 2, out  # pytest's "interrupted"
    assert (tmp_path / "torn-down").read_text() == "yes", out
    assert "KeyboardInterrupt" in out or "SIGTERM" in out, out
    # the forked child died of the signal (not an interrupted pytest of its own): reaped by
    # the session, it no longer exists
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists()


LANE = """
import os, sys, time
from pathlib import Path
from tests.sigterm import interrupt_on_sigterm

out = Path(sys.argv[1])
interrupt_on_sigterm()
try:
    (out / "ready").write_text("yes")
    time.sleep(60)
finally:
    time.sleep(0.5)  # a teardown a second SIGTERM must not cut short
    (out / "torn-down").write_text("yes")
"""


def test_a_chaos_lane_or_soak_stops_its_world_on_sigterm_and_only_once(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", LANE, str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "ready").exists()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # the group's and the parent's, during the teardown
    _, err = proc.communicate(timeout=30)
    assert (tmp_path / "torn-down").read_text() == "yes"
    assert b"KeyboardInterrupt: SIGTERM" in err
