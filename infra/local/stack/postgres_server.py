"""PostgreSQL 15 from Debian: a cluster in the run directory.

Durable by default: the registry acks a notification only after its commit, so a commit lost in
a crash would be a CCD announced, then gone (``OBSINGEST_STACK_POSTGRES_DURABLE=false``: speed
for throwaway test clusters). As root the cluster runs as an unprivileged user; no Unix sockets
(deep checkouts overflow sun_path). A postmaster restarted by ``pg_ctl restart`` is adopted.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
from pathlib import Path

from infra.local.stack import process
from infra.local.stack.base import Launch, Service
from infra.local.stack.errors import FetchError, StackError
from infra.local.stack.process import PidRecord, port_open

SUPERUSER = "postgres"


def run_as_user(configured: str) -> str | None:
    """OS user to own and run the cluster: None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for candidate in filter(None, (configured, "postgres", "nobody")):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(candidate).pw_name
    raise StackError("postgres", "running as root and no unprivileged user found to run postgres")


def server_options(port: int, host: str, durable: bool = True) -> list[str]:
    """``-c`` settings of the cluster; ``durable=False`` trades crash safety for speed."""
    durability = "on" if durable else "off"
    settings = {
        "port": str(port),
        "listen_addresses": host,
        "unix_socket_directories": "",
        "fsync": durability,
        "synchronous_commit": durability,
        "full_page_writes": durability,
        "max_connections": "200",
        "shared_buffers": "128MB",
        "log_min_messages": "warning",
        "log_connections": "off",
    }
    return [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]


def registry_url(host: str, port: int, database: str = "postgres") -> str:
    """SQLAlchemy URL of a database on this cluster (trust auth: no password)."""
    return f"postgresql+psycopg://{SUPERUSER}@{host}:{port}/{database}"


class Postgres(Service):
    name = "postgres"
    port_fields = ("postgres_port",)
    stop_signal = signal.SIGINT  # "fast" shutdown: do not wait for clients to disconnect
    stop_timeout = 20.0

    @property
    def pgdata(self) -> Path:
        return self.settings.data_dir(self.name) / "data"

    def env(self) -> dict[str, str]:
        return {"OBSINGEST_REGISTRY_URL": registry_url(self.settings.host, self.settings.postgres_port)}

    def _bin(self, tool: str) -> str:
        bindir = self.settings.pg_bin()
        if bindir is None or not (bindir / tool).exists():
            raise FetchError(
                self.name,
                f"PostgreSQL server binary {tool!r} not found (make system-deps installs Debian's "
                "postgresql; or set OBSINGEST_STACK_PG_BIN_DIR)",
            )
        return str(bindir / tool)

    def fetch(self) -> None:
        """Check for Debian's server binaries (nothing to download)."""
        self._bin("initdb")
        self._bin("postgres")

    def prepare(self) -> None:
        """initdb the cluster the first time, owned by the user that will run it, beside the data
        directory and renamed into place once whole (initdb writes PG_VERSION before its bootstrap)."""
        user = run_as_user(self.settings.postgres_user)
        base = self.settings.data_dir(self.name)
        base.mkdir(parents=True, exist_ok=True)
        if user:
            shutil.chown(base, user)
        if (self.pgdata / "PG_VERSION").exists():
            if user:
                _chown_tree(self.pgdata, user)
            return
        staging = self.pgdata.with_name(f"{self.pgdata.name}.initdb")
        for leftover in (self.pgdata, staging):
            shutil.rmtree(leftover, ignore_errors=True)
        argv = [self._bin("initdb"), "-D", str(staging), "-U", SUPERUSER, "--auth=trust"]
        argv += ["--encoding=UTF8", "--locale=C", "--no-sync"]
        self.run_logged(argv, "initdb", cwd=str(base), **process.as_user(user))
        staging.rename(self.pgdata)

    def launch(self) -> Launch:
        s = self.settings
        user = run_as_user(s.postgres_user)
        options = server_options(s.postgres_port, s.host, s.postgres_durable)
        argv = [self._bin("postgres"), "-D", str(self.pgdata), *options]
        return Launch(argv=argv, env={"LC_ALL": "C"}, user=user, cwd=s.data_dir(self.name))

    def record(self) -> PidRecord | None:
        """Our running postmaster: the recorded one, or one restarted in our data directory."""
        return super().record() or self._adopt_restarted()

    def stop(self) -> bool:
        self.record()  # a restarted postmaster is adopted first, so it is the one stopped
        return super().stop()

    def _adopt_restarted(self) -> PidRecord | None:
        """Record the live postmaster of our data directory (``pg_ctl restart`` starts one in a
        new session): it belongs to the owner of the one it replaced (unknown: the shared stack)."""
        pid = postmaster_pid(self.pgdata)
        if pid is None:
            return None
        before = self.stale
        owner = (before.owner, before.owner_pid, before.owner_start_ticks) if before else ("", None, None)
        ticks = process.process_start_ticks(pid)
        rec = PidRecord(self.name, pid, _pgid(pid), ticks, _cmdline(pid), str(self.log_path), *owner)
        process.write_pid_file(self.pid_path, rec)
        return rec

    def probe(self) -> None:
        """``SELECT 1`` over TCP."""
        import psycopg

        if not port_open(self.settings.host, self.settings.postgres_port):
            raise StackError(self.name, f"nothing listens on {self.endpoint}")
        s = self.settings
        conninfo = f"host={s.host} port={s.postgres_port} user={SUPERUSER} dbname=postgres connect_timeout=2"
        with psycopg.connect(conninfo) as conn:
            conn.execute("SELECT 1").fetchone()


def postmaster_pid(pgdata: Path) -> int | None:
    """The live postmaster serving ``pgdata``, from its ``postmaster.pid`` (line 1: pid, line 2:
    data directory); None for a stale file (crashed server, recycled pid)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    if len(lines) < 2 or Path(lines[1]).resolve() != pgdata.resolve():
        return None
    if not process.pid_alive(pid):
        return None
    argv = _cmdline(pid)
    if not argv or not Path(argv[0]).name.startswith("postgres"):
        return None
    return pid


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _chown_tree(path: Path, user: str) -> None:
    """Re-own a data dir (e.g. after the configured user changed); cheap when already right."""
    entry = pwd.getpwnam(user)
    if path.stat().st_uid == entry.pw_uid:
        return
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return pid
