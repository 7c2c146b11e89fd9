"""The local PostgreSQL is durable unless told otherwise, and a postmaster restarted behind the
stack's back (new pid, own session) is adopted so `stack status/down` keep managing it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from infra.local.stack.errors import StackError
from infra.local.stack.postgres_server import Postgres, postmaster_pid, server_options
from infra.local.stack.process import process_start_ticks, read_pid_file
from infra.local.stack.settings import load_settings

pytestmark = pytest.mark.unit


def _options(durable: bool) -> dict[str, str]:
    argv = server_options(15432, "127.0.0.1", durable)
    return dict(arg.split("=", 1) for arg in argv if arg != "-c")


def test_durable_by_default_and_switchable_for_throwaway_clusters(monkeypatch):
    assert load_settings().postgres_durable is True
    on = _options(True)
    assert (on["fsync"], on["synchronous_commit"], on["full_page_writes"]) == ("on", "on", "on")
    off = _options(False)
    assert (off["fsync"], off["synchronous_commit"]) == ("off", "off")
    monkeypatch.setenv("OBSINGEST_STACK_POSTGRES_DURABLE", "false")
    assert load_settings().postgres_durable is False


@pytest.fixture
def fake_postmaster(tmp_path: Path):
    """A live process whose argv[0] is named postgres, in its own session, like pg_ctl's."""
    exe = tmp_path / "bin" / "postgres"
    exe.parent.mkdir()
    exe.symlink_to("/bin/sleep")
    proc = subprocess.Popen([str(exe), "60"], start_new_session=True)
    # Popen returns once the child is forked, maybe before its exec: wait until it is "postgres"
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while str(exe).encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_restarted_postmaster_is_adopted_from_postmaster_pid(tmp_path, fake_postmaster):
    settings = load_settings(run_dir=tmp_path / "run")
    pg = Postgres(settings)
    pg.pgdata.mkdir(parents=True)
    assert pg.record() is None and postmaster_pid(pg.pgdata) is None
    (pg.pgdata / "postmaster.pid").write_text(f"{fake_postmaster.pid}\n{pg.pgdata}\n1700000000\n")
    rec = pg.record()
    assert rec is not None and rec.pid == fake_postmaster.pid
    assert rec.pgid == fake_postmaster.pid
    assert rec.start_ticks == process_start_ticks(fake_postmaster.pid)
    assert read_pid_file(pg.pid_path) == rec  # recorded: `down` finds it
    assert pg.stop() is True
    deadline = time.monotonic() + 10
    while fake_postmaster.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_postmaster.poll() is not None


def test_a_stale_or_foreign_postmaster_pid_is_not_adopted(tmp_path, fake_postmaster):
    pg = Postgres(load_settings(run_dir=tmp_path / "run"))
    pg.pgdata.mkdir(parents=True)
    pid_file = pg.pgdata / "postmaster.pid"
    pid_file.write_text(f"{fake_postmaster.pid}\n/somewhere/else\n")
    assert postmaster_pid(pg.pgdata) is None  # another cluster's
    pid_file.write_text(f"{os.getpid()}\n{pg.pgdata}\n")
    assert postmaster_pid(pg.pgdata) is None  # alive, but not a postgres
    pid_file.write_text("garbage\n")
    assert postmaster_pid(pg.pgdata) is None


def _fake_initdb(bindir: Path, body: str) -> None:
    """An ``initdb`` that makes ``-D``'s directory, writes PG_VERSION first (as initdb does,
    before its bootstrap), then runs ``body``."""
    bindir.mkdir(exist_ok=True)
    script = bindir / "initdb"
    script.write_text(f'#!/bin/sh\nD="$2"\nmkdir -p "$D"\necho 15 > "$D/PG_VERSION"\n{body}\n')
    script.chmod(0o755)
    (bindir / "postgres").write_text("#!/bin/sh\n")


def test_an_initdb_killed_midway_is_redone_at_the_next_start(tmp_path, monkeypatch):
    """initdb writes PG_VERSION before its bootstrap: killed in between, the cluster is half made,
    and a start that took PG_VERSION for a finished cluster would launch on it and fail at every
    start until someone deleted the directory. The next start initialises it again."""
    monkeypatch.setattr("infra.local.stack.postgres_server.run_as_user", lambda configured: None)
    bindir = tmp_path / "bin"
    pg = Postgres(load_settings(run_dir=tmp_path / "run", pg_bin_dir=str(bindir)))
    _fake_initdb(bindir, "kill -9 $$")
    with pytest.raises(StackError, match="initdb failed"):
        pg.prepare()
    _fake_initdb(bindir, 'touch "$D/bootstrapped"')
    pg.prepare()
    assert (pg.pgdata / "PG_VERSION").exists() and (pg.pgdata / "bootstrapped").exists()
    assert sorted(p.name for p in pg.pgdata.parent.iterdir()) == ["data"]  # nothing half made
