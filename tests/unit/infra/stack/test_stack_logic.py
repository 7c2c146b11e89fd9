"""Pure logic of the local stack launchers: settings, rendered configs, exports, pid files."""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.local.stack import Stack, render_exports, render_status_table
from infra.local.stack.base import ServiceStatus
from infra.local.stack.errors import StackError
from infra.local.stack.kafka_broker import new_cluster_id, properties_to_docker_env, render_server_properties
from infra.local.stack.postgres_server import registry_url, run_as_user, server_options
from infra.local.stack.process import (
    PidRecord,
    group_alive,
    process_start_ticks,
    read_pid_file,
    record_alive,
    spawn,
    stop_record,
    tail,
    write_pid_file,
)
from infra.local.stack.settings import StackSettings, load_settings, project_root

pytestmark = pytest.mark.unit


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_settings_are_read_from_env_at_load_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBSINGEST_STACK_KAFKA_PORT", "29092")
    monkeypatch.setenv("OBSINGEST_STACK_GCS_BACKEND", "memory")
    settings = load_settings()
    assert settings.kafka_port == 29092
    assert settings.gcs_backend == "memory"
    monkeypatch.delenv("OBSINGEST_STACK_KAFKA_PORT")
    assert load_settings().kafka_port == StackSettings.model_fields["kafka_port"].default


def test_relative_dirs_resolve_against_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # resolved as project_root() itself is (from __file__): the physical directory, so a
    # checkout whose .cache is a symlink (a git worktree sharing the main checkout's cache)
    # names, locks and hands to the services the same files as that checkout
    for name in ("OBSINGEST_STACK_RUN_DIR", "OBSINGEST_STACK_CACHE_DIR"):  # the defaults are tested
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.run_dir == (project_root() / ".run" / "stack").resolve()
    assert settings.cache_dir == (project_root() / ".cache").resolve()
    real = tmp_path.resolve()
    checkout, shared = real / "checkout", real / "main" / ".cache"
    checkout.mkdir()
    shared.mkdir(parents=True)
    (checkout / ".cache").symlink_to(shared)
    monkeypatch.setattr("infra.local.stack.settings.project_root", lambda: checkout)
    linked = load_settings()
    assert linked.cache_dir == shared
    assert linked.run_dir == checkout / ".run" / "stack"
    assert load_settings(run_dir=Path("../elsewhere")).run_dir == real / "elsewhere"
    monkeypatch.undo()
    absolute = load_settings(run_dir=tmp_path / "run")
    assert absolute.run_dir == tmp_path / "run"
    assert absolute.pid_file("kafka") == tmp_path / "run" / "pids" / "kafka.json"
    assert absolute.log_file("gcs") == tmp_path / "run" / "logs" / "gcs.log"


def test_kafka_properties_allow_big_records_on_one_node(tmp_path: Path) -> None:
    settings = load_settings(kafka_port=1111, kafka_controller_port=2222, kafka_partitions=3)
    props = _props(render_server_properties(settings, tmp_path / "data"))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:2222"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1111"
    assert props["num.partitions"] == "3"
    assert props["auto.create.topics.enable"] == "true"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["log.dirs"] == str(tmp_path / "data")
    eight_mib = 8 * 1024 * 1024
    assert int(props["message.max.bytes"]) > eight_mib
    assert int(props["replica.fetch.max.bytes"]) >= int(props["message.max.bytes"])
    assert int(props["socket.request.max.bytes"]) > int(props["message.max.bytes"])
    assert "log.dirs" not in _props(render_server_properties(settings, None))


def test_properties_become_apache_kafka_image_env() -> None:
    env = properties_to_docker_env(
        "# comment\nlog.dirs=/x\nmessage.max.bytes=10\nlistener.security.protocol.map=A:B\n"
        "some_key.with-dash=v\n"
    )
    assert env == {
        "KAFKA_MESSAGE_MAX_BYTES": "10",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "A:B",
        "KAFKA_SOME__KEY_WITH___DASH": "v",
    }


def test_cluster_id_is_22_char_urlsafe_base64() -> None:
    ids = {new_cluster_id() for _ in range(20)}
    assert len(ids) == 20
    for cid in ids:
        assert len(cid) == 22 and "=" not in cid and "/" not in cid and "+" not in cid


def test_env_exports_name_every_endpoint() -> None:
    settings = load_settings(kafka_port=1, pubsub_port=2, gcs_port=3, postgres_port=4, pubsub_project_id="p")
    env = Stack(settings).env()
    assert env == {
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:2",
        "PUBSUB_PROJECT_ID": "p",
        "GOOGLE_CLOUD_PROJECT": "p",
        "STORAGE_EMULATOR_HOST": "http://127.0.0.1:3",
        "OBSINGEST_REGISTRY_URL": "postgresql+psycopg://postgres@127.0.0.1:4/postgres",
    }
    text = render_exports({"A": "x y", "B": "plain"})
    assert text == "export A='x y'\nexport B=plain\n"
    assert shlex.split(text.splitlines()[0]) == ["export", "A=x y"]


def test_stack_rejects_unknown_service_names() -> None:
    with pytest.raises(ValueError, match="unknown service"):
        Stack(load_settings(), only=["kafka", "redis"])
    assert [s.name for s in Stack(load_settings(), only=["postgres"]).services] == ["postgres"]


def test_status_table_marks_each_state() -> None:
    rows = [
        ServiceStatus("kafka", True, True, 10, "127.0.0.1:1"),
        ServiceStatus("gcs", True, False, 11, "http://x", "refused"),
        ServiceStatus("pubsub", False, False, None, "127.0.0.1:2"),
    ]
    lines = render_status_table(rows).splitlines()
    assert lines[0].split()[:3] == ["SERVICE", "STATE", "PID"]
    assert lines[1].split()[:3] == ["kafka", "healthy", "10"]
    assert lines[2].split()[:2] == ["gcs", "unhealthy"] and lines[2].endswith("refused")
    assert lines[3].split()[:3] == ["pubsub", "down", "-"]


def test_postgres_options_and_url() -> None:
    opts = server_options(5555, "127.0.0.1")
    pairs = dict(o.split("=", 1) for o in opts[1::2])
    assert opts[0::2] == ["-c"] * len(pairs)
    assert pairs["port"] == "5555"
    assert pairs["fsync"] == "on"  # durable by default
    assert pairs["unix_socket_directories"] == ""
    assert int(pairs["max_connections"]) >= 200
    assert registry_url("h", 1, "db") == "postgresql+psycopg://postgres@h:1/db"


def test_postgres_runs_unprivileged_when_root() -> None:
    user = run_as_user("")
    if os.geteuid() == 0:
        assert user in {"postgres", "nobody"}
    else:
        assert user is None


def test_stack_error_carries_log_tail() -> None:
    err = StackError("kafka", "not healthy", "line1\nline2")
    assert "kafka: not healthy" in str(err)
    assert str(err).endswith("line1\nline2")
    assert err.retriable


def test_pid_file_round_trip_and_recycled_pid(tmp_path: Path) -> None:
    rec = PidRecord("svc", os.getpid(), os.getpgid(0), process_start_ticks(os.getpid()), ["x"], "l")
    path = tmp_path / "pids" / "svc.json"
    write_pid_file(path, rec)
    assert read_pid_file(path) == rec
    assert record_alive(rec)
    # same pid, different start time: a recycled pid is not ours
    assert not record_alive(PidRecord("svc", rec.pid, rec.pgid, (rec.start_ticks or 0) + 1, [], ""))
    path.write_text("not json")
    assert read_pid_file(path) is None
    assert read_pid_file(tmp_path / "missing.json") is None


#: a start SIGKILLed right after spawn's Popen, before the pid file: prints the spawned pid
_KILLED_BEFORE_PID_FILE = """
import os, signal, sys
from pathlib import Path
from infra.local.stack import process

def killed(path, record):
    print(record.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

process.write_pid_file = killed
run = Path(sys.argv[1])
process.spawn("dummy", [sys.executable, "-c", "import time; time.sleep(300)"],
              log_path=run / "dummy.log", pid_path=run / "dummy.json")
"""


def test_a_start_killed_before_its_pid_file_leaves_no_service_running(tmp_path: Path) -> None:
    """SIGKILLed between spawn's Popen and its pid file, a start left the service running with no
    record of it: the next start failed on its port (or, before it listened, ran it twice).
    The spawned process waits for the record, and exits when its writer is gone."""
    env = {**os.environ, "PYTHONPATH": str(project_root())}
    argv = [sys.executable, "-c", _KILLED_BEFORE_PID_FILE, str(tmp_path)]
    starter = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert starter.returncode == -signal.SIGKILL, starter.stderr
    pid = int(starter.stdout)
    try:
        exited = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    try:
        gone = select.select([exited], [], [], 30)[0]
        if not gone:  # still the one spawned: stop it
            os.killpg(pid, signal.SIGKILL)
    finally:
        os.close(exited)
    assert gone, "the spawned service runs on, unrecorded"


def test_spawn_and_stop_kill_the_whole_group(tmp_path: Path) -> None:
    # a parent that ignores SIGTERM and has a child: stop must escalate and leave nothing
    script = (
        "import signal,subprocess,time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "subprocess.Popen(['sleep','300']); print('RE'+'ADY', flush=True); time.sleep(300)"
    )
    rec = spawn(
        "dummy",
        [sys.executable, "-c", script],
        log_path=tmp_path / "logs" / "dummy.log",
        pid_path=tmp_path / "pids" / "dummy.json",
    )
    try:
        deadline = time.monotonic() + 10
        while "READY" not in tail(tmp_path / "logs" / "dummy.log") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert record_alive(rec)
        assert rec.pgid == rec.pid
        members = subprocess.run(
            ["pgrep", "-g", str(rec.pgid)], capture_output=True, text=True
        ).stdout.split()
        assert len(members) == 2
        assert stop_record(rec, signal.SIGTERM, timeout=0.5) is True
        assert not record_alive(rec)
        # zombies awaiting init's reaping may linger in `ps`; no live member may remain
        assert not group_alive(rec.pgid)
    finally:
        stop_record(rec, signal.SIGKILL, timeout=1)
    assert stop_record(rec) is False
    assert "starting:" in tail(tmp_path / "logs" / "dummy.log")
