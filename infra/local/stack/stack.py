"""The four services together: fetch, bring up (idempotently), report, export, tear down."""

from __future__ import annotations

import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from infra.local.stack.base import Service, ServiceStatus
from infra.local.stack.errors import StackError
from infra.local.stack.gcs_emulator import Gcs
from infra.local.stack.kafka_broker import Kafka
from infra.local.stack.owner import Owner
from infra.local.stack.postgres_server import Postgres
from infra.local.stack.pubsub_emulator import PubSub
from infra.local.stack.settings import StackSettings, load_settings
from obsingest.logs import get_logger, log_event

_log = get_logger("obsingest.stack")

#: by name, in start order: Pub/Sub before GCS (GCS publishes notifications to it)
SERVICE_CLASSES: dict[str, type[Service]] = {cls.name: cls for cls in (PubSub, Gcs, Kafka, Postgres)}


@dataclass
class UpResult:
    started: list[str] = field(default_factory=list)
    already_running: list[str] = field(default_factory=list)


class Stack:
    """The local service stack described by one :class:`StackSettings`."""

    def __init__(
        self, settings: StackSettings | None = None, only: list[str] | None = None, owner: Owner | None = None
    ) -> None:
        """``owner``: who may stop the services this object starts (default: the shared stack)."""
        self.settings = settings or load_settings()
        self.owner = owner or Owner.shared()
        #: the services the last ``down`` left running: another owner's
        self.refused: list[str] = []
        unknown = set(only or []) - set(SERVICE_CLASSES)
        if unknown:
            raise ValueError(f"unknown service(s) {sorted(unknown)}; known: {tuple(SERVICE_CLASSES)}")
        self.services: list[Service] = [
            cls(self.settings, self.owner)
            for name, cls in SERVICE_CLASSES.items()
            if not only or name in only
        ]

    def service(self, name: str) -> Service:
        return {svc.name: svc for svc in self.services}[name]

    def fetch(self) -> None:
        """Every artefact into the cache (no-op when warm), all at once: Maven fetching the
        broker's jars waits on the network while Go compiles the emulators."""
        with ThreadPoolExecutor(max_workers=len(self.services) or 1) as pool:
            for future in [pool.submit(svc.fetch_once) for svc in self.services]:
                future.result()

    def up(self, timeout: float | None = None) -> UpResult:
        """Start whatever is not running and wait until all are healthy; one that fails is
        stopped again and a StackError with its log tail raised."""
        self.fetch()
        conflicts = [(svc.name, why) for svc in self.services if (why := svc.elsewhere()) is not None]
        if conflicts:  # before anything starts: nothing half-up to stop again
            raise StackError(",".join(n for n, _ in conflicts), "; ".join(f"{n}: {w}" for n, w in conflicts))
        result = UpResult()
        for svc in self.services:
            (result.started if svc.start() else result.already_running).append(svc.name)

        def wait(svc: Service) -> StackError | None:
            try:
                svc.wait_healthy(timeout)
            except StackError as exc:
                return exc
            return None

        with ThreadPoolExecutor(max_workers=len(self.services) or 1) as pool:
            errors = [e for e in pool.map(wait, self.services) if e is not None]
        if errors:
            for exc in errors:
                if exc.service in result.started:
                    self.service(exc.service).stop()
            if len(errors) == 1:
                raise errors[0]
            raise StackError(
                ",".join(e.service for e in errors),
                "services failed to start:\n\n" + "\n\n".join(str(e) for e in errors),
            )
        log_event(_log, "stack.up", started=result.started, running=result.already_running)
        return result

    def down(self, names: list[str] | None = None, purge: bool = False) -> list[str]:
        """Stop (in reverse order) the services this object's owner may stop; ``purge`` also
        deletes the data of those stopped or not running."""
        stopped = []
        self.refused = []
        for svc in reversed(self.services):
            if names is not None and svc.name not in names:
                continue
            if svc.stop():
                stopped.append(svc.name)
            elif svc.running():
                self.refused.append(svc.name)
                continue  # someone else's, whose data must stay
            if purge:
                shutil.rmtree(self.settings.data_dir(svc.name), ignore_errors=True)
        return stopped

    def status(self) -> list[ServiceStatus]:
        with ThreadPoolExecutor(max_workers=len(self.services) or 1) as pool:
            return list(pool.map(lambda s: s.status(), self.services))

    def env(self) -> dict[str, str]:
        """Every variable clients need."""
        out: dict[str, str] = {}
        for svc in self.services:
            out.update(svc.env())
        return out


def render_exports(env: dict[str, str]) -> str:
    """``export K=V`` lines, shell-quoted, for ``eval "$(obsingest stack env)"``."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())


def render_status_table(rows: list[ServiceStatus]) -> str:
    header = ("SERVICE", "STATE", "PID", "ENDPOINT", "DETAIL")
    body = []
    for r in rows:
        state = "healthy" if r.healthy else ("unhealthy" if r.running else "down")
        if r.healthy and not r.running:
            state = "healthy (not ours)"
        body.append((r.name, state, str(r.pid or "-"), r.endpoint, r.detail))
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *body]
    ]
    return "\n".join(lines) + "\n"
