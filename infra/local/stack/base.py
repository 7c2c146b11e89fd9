"""The shape every local service shares: fetch once, start detached, probe, stop by pid."""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from infra.local.stack import process
from infra.local.stack.errors import StackError
from infra.local.stack.owner import Owner, log_stop, may_stop
from infra.local.stack.process import PidRecord
from infra.local.stack.settings import StackSettings
from obsingest.fileio import flocked
from obsingest.logs import get_logger, log_event

_log = get_logger("obsingest.stack")


@contextmanager
def artefact_lock(cache_dir: Path, name: str) -> Iterator[None]:
    """The cache's ``flock`` for artefact ``name``, so concurrent processes build it once."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with flocked(cache_dir / f".fetch-{name}.lock"):
        yield


@dataclass(frozen=True)
class Launch:
    """How to run a service: argv, extra environment, and the OS user to run as (None = us)."""

    argv: list[str]
    env: Mapping[str, str]
    user: str | None = None
    cwd: Path | None = None


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    healthy: bool
    pid: int | None
    endpoint: str
    detail: str = ""


class Service(ABC):
    """One local service. Subclasses say how to fetch, prepare, launch and probe it."""

    name: ClassVar[str]
    #: the settings fields of the TCP ports it listens on (checked free before start; the
    #: container backend gives each a free port); the first is the clients' endpoint
    port_fields: ClassVar[tuple[str, ...]]
    stop_signal: ClassVar[int] = signal.SIGTERM
    stop_timeout: ClassVar[float] = 20.0

    def __init__(self, settings: StackSettings, owner: Owner | None = None) -> None:
        self.settings = settings
        self.owner = owner or Owner.shared()
        #: the last record found dead by :meth:`record` (its owner passes to a restarted one)
        self.stale: PidRecord | None = None

    @abstractmethod
    def fetch(self) -> None:
        """Put the pinned artefacts into the cache (no-op when already there)."""

    @abstractmethod
    def launch(self) -> Launch:
        """The command line, after :meth:`prepare` has run."""

    @abstractmethod
    def probe(self) -> None:
        """Raise if the service does not answer a real request; return quietly if it does."""

    @abstractmethod
    def env(self) -> dict[str, str]:
        """Environment variables clients need to reach this service."""

    def ports(self) -> list[int]:
        return [getattr(self.settings, field) for field in self.port_fields]

    @property
    def endpoint(self) -> str:
        return f"{self.settings.host}:{self.ports()[0]}"

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """One-time data initialisation (format storage, initdb); default: nothing."""

    def fetch_once(self) -> None:
        with artefact_lock(self.settings.cache_dir, self.name):
            self.fetch()

    @property
    def log_path(self) -> Path:
        return self.settings.log_file(self.name)

    @property
    def pid_path(self) -> Path:
        return self.settings.pid_file(self.name)

    def log_tail(self, lines: int = 40) -> str:
        return process.tail(self.log_path, lines)

    def run_logged(self, argv: list[str], what: str, **kwargs: Any) -> None:
        """A one-off step (format, initdb) into the service's log; StackError with its tail."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            if subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, **kwargs).returncode:
                raise StackError(self.name, f"{what} failed", self.log_tail())

    def record(self) -> PidRecord | None:
        """The pid record of our running instance, or None (stale records are removed)."""
        rec = process.read_pid_file(self.pid_path)
        if rec is None:
            return None
        if process.record_alive(rec):
            return rec
        self.stale = rec
        self.pid_path.unlink(missing_ok=True)
        return None

    def running(self) -> bool:
        return self.record() is not None

    def healthy(self) -> bool:
        return self._probe_error() is None

    def _probe_error(self) -> str | None:
        """Why :meth:`probe` failed (its first line), or None if it passed."""
        try:
            self.probe()
        except Exception as exc:
            return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        return None

    def elsewhere(self) -> str | None:
        """Why our recorded instance cannot serve these settings (it listens on other ports)."""
        rec = self.record()
        if rec is None or not _moved(rec, self.ports()):
            return None
        return (
            f"already running from {self.settings.run_dir} (pid {rec.pid}) on port(s) {rec.ports}, "
            f"not {self.ports()} as configured now; stop it with the settings that started it "
            f"(`obsingest stack down`) or give this configuration its own OBSINGEST_STACK_RUN_DIR"
        )

    def start(self) -> bool:
        """Start the service unless ours is already running. Returns True if it was started."""
        if (why := self.elsewhere()) is not None:
            raise StackError(self.name, why)
        if self.running():
            return False
        busy = [p for p in self.ports() if process.port_open(self.settings.host, p)]
        if busy:
            raise StackError(
                self.name,
                f"port(s) {busy} on {self.settings.host} are taken by a process this stack did "
                f"not start; stop it or set OBSINGEST_STACK_{self.name.upper()}_PORT",
            )
        self.fetch_once()
        self.settings.run_dir.mkdir(parents=True, exist_ok=True)
        self.prepare()
        spec = self.launch()
        rec = process.spawn(
            self.name,
            spec.argv,
            log_path=self.log_path,
            pid_path=self.pid_path,
            env=spec.env,
            user=spec.user,
            cwd=spec.cwd,
            owner=(self.owner.token, self.owner.pid, self.owner.start_ticks),
            ports=self.ports(),
        )
        log_event(_log, "stack.service.started", service=self.name, pid=rec.pid, owner=self.owner.token)
        return True

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Block until :meth:`probe` passes; raise StackError with the log tail otherwise."""
        timeout = self.settings.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                self.probe()
                return
            except Exception as exc:
                last = exc
            rec = process.read_pid_file(self.pid_path)
            if rec is not None and not process.record_alive(rec):
                self.pid_path.unlink(missing_ok=True)
                raise StackError(self.name, "process exited during start-up", self.log_tail())
            if time.monotonic() > deadline:
                why = f"not healthy after {timeout:.0f} s (last probe error: {last!r})"
                raise StackError(self.name, why, self.log_tail())
            time.sleep(0.2)

    def stop(self) -> bool:
        """Stop our instance's process group, if our owner may; True if one was stopped. Every
        call, refused or not, leaves a line in ``stops.log``."""
        rec = process.read_pid_file(self.pid_path)
        if rec is None:
            log_stop(self.settings.run_dir, self.owner, self.name, None, "nothing recorded")
            return False
        allowed, why = may_stop(self.owner, rec)
        if not allowed:
            log_stop(self.settings.run_dir, self.owner, self.name, rec, f"refused: {why}")
            refused = {"service": self.name, "pid": rec.pid, "reason": why}
            log_event(_log, "stack.service.stop_refused", logging.WARNING, **refused)
            return False
        log_stop(self.settings.run_dir, self.owner, self.name, rec, f"stopping ({why})")
        was_running = process.stop_record(rec, self.stop_signal, self.stop_timeout)
        if process.read_pid_file(self.pid_path) == rec:  # not a record written since
            self.pid_path.unlink(missing_ok=True)
        if was_running:
            log_event(_log, "stack.service.stopped", service=self.name, pid=rec.pid)
        return was_running

    def status(self) -> ServiceStatus:
        rec = self.record()
        error = self._probe_error()
        detail = error or ""
        if rec is not None and _moved(rec, self.ports()):
            detail = f"ours listens on {rec.ports}, configured {self.ports()}"
        pid = rec.pid if rec else None
        return ServiceStatus(self.name, rec is not None, error is None, pid, self.endpoint, detail)


def _moved(rec: PidRecord, ports: list[int]) -> bool:
    """The recorded instance listens on other ports (a record without ports is taken at its word)."""
    return bool(rec.ports) and sorted(rec.ports) != sorted(ports)
