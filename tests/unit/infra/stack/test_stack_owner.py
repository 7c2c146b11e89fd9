"""Only a stack's owner stops it (``infra.local.stack.owner``), and every stop asked is logged.

The CI failure this guards against: a test session's services stopped whole mid-run, their pid
files emptied, by a ``Stack.down(names=...)`` of *another* process that used the same run
directory (a killed run's session in a checkout cloned again at the same path). Here the
services are a sleeping process each, in a run directory of the test's own.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from infra.local.stack import Stack, load_settings
from infra.local.stack.base import Launch, Service
from infra.local.stack.errors import StackError
from infra.local.stack.owner import SHARED_TOKEN, STOP_LOG, Owner
from infra.local.stack.process import read_pid_file, record_alive, spawn, stop_record

pytestmark = pytest.mark.unit


class Sleeper(Service):
    """A service that is a sleeping Python process."""

    name: ClassVar[str] = "postgres"  # a name Stack.down knows; nothing of PostgreSQL runs
    stop_timeout: ClassVar[float] = 5.0

    def fetch(self) -> None:
        pass

    def launch(self) -> Launch:
        return Launch([sys.executable, "-c", "import time; time.sleep(300)"], {})

    def probe(self) -> None:
        if not self.running():
            raise RuntimeError("not running")

    def env(self) -> dict[str, str]:
        return {}

    def ports(self) -> list[int]:
        return []

    @property
    def endpoint(self) -> str:
        return "-"


def _stack(run_dir: Path, owner: Owner | None) -> Stack:
    stack = Stack(load_settings(run_dir=run_dir), only=["postgres"], owner=owner)
    stack.services = [Sleeper(stack.settings, stack.owner)]
    return stack


def _log(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / STOP_LOG).read_text().splitlines()]


@pytest.fixture
def run_dir(tmp_path: Path):  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    yield run
    rec = read_pid_file(run / "pids" / "postgres.json")
    if rec is not None:  # never leave a sleeper behind, whatever the test did
        stop_record(rec, timeout=1)


def test_a_session_stops_only_what_it_started_not_a_newer_session_in_the_same_dir(run_dir: Path) -> None:
    old = _stack(run_dir, Owner.private("pytest-session"))
    assert old.service("postgres").start()
    # the old run's service is gone (its checkout removed) and a new session starts its own
    # in the same run directory; the old session's object still lists "postgres" as started
    stop_record(old.service("postgres").record())  # type: ignore[arg-type]
    new = _stack(run_dir, Owner.private("pytest-session"))
    assert new.service("postgres").start()
    theirs = new.service("postgres").record()
    assert theirs is not None

    assert old.down(names=["postgres"]) == []  # the old session's close(), at its end
    assert record_alive(theirs)
    assert read_pid_file(run_dir / "pids" / "postgres.json") == theirs
    refused = _log(run_dir)[-1]
    assert str(refused["outcome"]).startswith("refused: owned by pytest-session:")
    assert refused["asker"] == {  # who asked, so the next occurrence names its culprit
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv,
        "owner": old.owner.token,
        "owner_pid": os.getpid(),
    }
    assert any("test_stack_owner.py" in frame for frame in refused["caller"])  # type: ignore[attr-defined]

    assert new.down(names=["postgres"]) == ["postgres"]
    assert not record_alive(theirs)
    assert _log(run_dir)[-1]["outcome"] == "stopping (own)"


def test_the_shared_stack_cannot_stop_a_live_session_but_stops_its_orphans(run_dir: Path) -> None:
    session = _stack(run_dir, Owner.private("pytest-session"))
    assert session.service("postgres").start()
    mine = session.service("postgres").record()
    assert mine is not None
    shared = _stack(run_dir, None)
    assert shared.down(purge=True) == []  # `obsingest stack down` while the session runs
    assert shared.refused == ["postgres"]
    assert record_alive(mine)
    assert "refused" in str(_log(run_dir)[-1]["outcome"])
    assert session.down() == ["postgres"]

    # a session that died (its pid is that of an exited process) leaves an orphan: the shared
    # stack's `down` may stop it, another session may not
    gone = spawn("x", [sys.executable, "-c", "pass"], log_path=run_dir / "x.log", pid_path=run_dir / "x.json")
    os.waitpid(gone.pid, 0)
    dead = Owner("pytest-session:dead", gone.pid, gone.start_ticks)
    assert _stack(run_dir, dead).service("postgres").start()
    orphan = read_pid_file(run_dir / "pids" / "postgres.json")
    assert orphan is not None and orphan.owner == "pytest-session:dead"
    assert _stack(run_dir, Owner.private("pytest-session")).down() == []
    assert record_alive(orphan)
    assert _stack(run_dir, None).down() == ["postgres"]
    assert not record_alive(orphan)
    assert str(_log(run_dir)[-1]["outcome"]).startswith("stopping (orphan: its owner")


def test_a_forked_child_of_the_owner_stops_nothing(run_dir: Path) -> None:
    stack = _stack(run_dir, Owner.private("pytest-session"))
    assert stack.service("postgres").start()
    rec = stack.service("postgres").record()
    assert rec is not None
    child = os.fork()
    if child == 0:  # e.g. an atexit or a finaliser reached in a forked worker
        try:
            os._exit(0 if stack.down() == [] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert record_alive(rec)
    assert "not the owner's process" in str(_log(run_dir)[-1]["outcome"])
    assert stack.down() == ["postgres"]


def test_the_shared_stack_is_stopped_by_any_shared_stack_as_before(run_dir: Path) -> None:
    """`obsingest stack up` then, in another process, `obsingest stack down`; records written
    before owners existed count as the shared stack's."""
    up = _stack(run_dir, None)
    assert up.service("postgres").start()
    rec = up.service("postgres").record()
    assert rec is not None and rec.owner == SHARED_TOKEN
    legacy = run_dir / "pids" / "postgres.json"
    data = json.loads(legacy.read_text())
    for key in ("owner", "owner_pid", "owner_start_ticks"):
        del data[key]
    legacy.write_text(json.dumps(data))
    assert _stack(run_dir, None).down() == ["postgres"]
    assert not record_alive(rec)
    assert _stack(run_dir, None).down() == []
    assert _log(run_dir)[-1]["outcome"] == "nothing recorded"


def test_the_cli_says_what_it_left_running_and_keeps_its_data(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from obsingest_cli.script import stack as cli

    session = _stack(run_dir, Owner.private("pytest-session"))
    assert session.service("postgres").start()
    (run_dir / "postgres" / "data").mkdir(parents=True)
    monkeypatch.setenv("OBSINGEST_STACK_RUN_DIR", str(run_dir))
    assert cli.down(argparse.Namespace(services=["postgres"], purge=True)) == 0
    out = capsys.readouterr().out
    assert "stopped: nothing was running" in out
    assert "left running: postgres (started by a running test session" in out
    assert str(run_dir / STOP_LOG) in out
    assert (run_dir / "postgres" / "data").is_dir()
    assert session.down() == ["postgres"]


def test_the_session_backend_never_stops_a_service_a_later_fixture_finds_slow(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gcs`` ensures Pub/Sub too: a Pub/Sub the session started earlier that answers slowly
    then fails that fixture, and keeps serving the tests that have it."""
    from infra.local.stack import StackError
    from tests.integration.fixtures.backends import NativeBackend

    monkeypatch.setenv("OBSINGEST_STACK_RUN_DIR", str(run_dir))
    monkeypatch.setenv("OBSINGEST_STACK_STARTUP_TIMEOUT", "0.5")
    backend = NativeBackend()
    slow: set[str] = set()

    def sleeper(name: str) -> Service:
        def probe(self: Service) -> None:
            if name in slow or not self.running():
                raise RuntimeError("no answer")

        cls: type[Sleeper] = type(f"Sleeper_{name}", (Sleeper,), {"name": name, "probe": probe})
        return cls(backend.stack.settings, backend.stack.owner)

    backend.stack.services = [sleeper("pubsub"), sleeper("gcs")]
    try:
        backend._ensure("pubsub")  # the pubsub fixture
        pubsub = backend.stack.service("pubsub").record()
        assert pubsub is not None and backend.started == ["pubsub"]
        slow.add("pubsub")
        with pytest.raises(StackError):
            backend._ensure("pubsub", "gcs")  # the gcs fixture
        assert record_alive(pubsub)
        assert backend.started == ["pubsub"]
        slow.clear()
    finally:
        backend.close()
    assert not record_alive(pubsub)


class PortedSleeper(Sleeper):
    """A sleeping process that says it listens on the settings' PostgreSQL port."""

    def ports(self) -> list[int]:
        return [self.settings.postgres_port]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_instance_started_on_other_ports_is_named_not_waited_for(run_dir: Path) -> None:
    port, configured = _free_port(), _free_port()
    while configured == port:
        configured = _free_port()
    first = Stack(load_settings(run_dir=run_dir, postgres_port=port), only=["postgres"], owner=Owner.shared())
    first.services = [PortedSleeper(first.settings, first.owner)]
    assert first.up(timeout=5).started == ["postgres"]
    try:
        rec = read_pid_file(first.services[0].pid_path)
        assert rec is not None and rec.ports == [port]
        assert first.up(timeout=5).already_running == ["postgres"]  # same ports: its own

        other = Stack(
            load_settings(run_dir=run_dir, postgres_port=configured), only=["postgres"], owner=Owner.shared()
        )
        other.services = [PortedSleeper(other.settings, other.owner)]
        with pytest.raises(StackError) as caught:
            other.up(timeout=60)
        message = str(caught.value)
        assert (
            f"[{port}]" in message and f"[{configured}]" in message and "OBSINGEST_STACK_RUN_DIR" in message
        )
        assert other.status()[0].detail == f"ours listens on [{port}], configured [{configured}]"
        assert record_alive(rec)  # left running for the configuration that started it
    finally:
        first.down()
