"""The integration fixtures' native backend never stops a stack it does not own, on a real
PostgreSQL: the CI failure where a whole session stack got a "fast shutdown request" mid-run.

Two sessions' backends share one run directory, as a session of a killed run does with the next
run of a checkout cloned again at the same path: the old one started PostgreSQL and still lists
it as started, its server went away with its checkout, the new session started its own there.
The old session's ``close()`` at its end must leave the new server running (refused, in
``stops.log``, naming the old session's process) and the new session's ``close()`` stops it.
Runs on a free port and a run directory of its own: the session's shared services are untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infra.local.stack.owner import STOP_LOG
from infra.local.stack.process import record_alive
from tests.integration.fixtures.backends import NativeBackend
from tests.integration.fixtures.private_stack import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Callable[[], NativeBackend]]]:
    """(the shared run directory, a maker of session backends using it); every backend made
    is closed afterwards, so nothing keeps running whatever the test did."""
    # world-traversable: PostgreSQL runs as an unprivileged user when we are root
    run = Path(tempfile.mkdtemp(prefix="obsingest-owner-"))
    run.chmod(0o755)
    monkeypatch.setenv("OBSINGEST_STACK_RUN_DIR", str(run))
    monkeypatch.setenv("OBSINGEST_STACK_POSTGRES_PORT", str(free_port()))
    made: list[NativeBackend] = []

    def make() -> NativeBackend:
        made.append(NativeBackend())
        return made[-1]

    try:
        yield run, make
    finally:
        for backend in reversed(made):
            backend.close()
        shutil.rmtree(run, ignore_errors=True)


def test_an_old_sessions_close_leaves_the_new_sessions_postgres_running(
    sessions: tuple[Path, Callable[[], NativeBackend]],
) -> None:
    run_dir, make = sessions
    old = make()
    old.postgres()
    assert old.started == ["postgres"]
    service = old.stack.service("postgres")
    first = service.record()
    assert first is not None
    # the old run's server goes away (its checkout deleted); `started` still names it
    assert service.stop()
    assert old.started == ["postgres"]

    new = make()
    url = new.postgres()
    assert new.started == ["postgres"]
    theirs = new.stack.service("postgres").record()
    assert theirs is not None and theirs.pid != first.pid
    log = new.stack.service("postgres").log_path
    shutdowns_before = log.read_text().count("shutdown request")

    old.close()  # the old session's end, reading the pid files now in that directory

    assert record_alive(theirs)
    assert new.stack.service("postgres").healthy(), url
    assert log.read_text().count("shutdown request") == shutdowns_before
    lines = [json.loads(line) for line in (run_dir / STOP_LOG).read_text().splitlines()]
    refused = lines[-1]
    assert refused["outcome"].startswith("refused: owned by pytest-session:")
    assert refused["record"]["pid"] == theirs.pid
    assert refused["asker"]["pid"] == os.getpid()
    assert refused["asker"]["owner"] == old.stack.owner.token

    new.close()
    assert not record_alive(theirs)
    assert "fast shutdown request" in log.read_text()
