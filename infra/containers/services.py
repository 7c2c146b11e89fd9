"""Kafka, Pub/Sub, GCS and PostgreSQL as containers, started through ``testcontainers``.

Host networking, 127.0.0.1, free ports from ``OBSINGEST_TC_PORT_RANGE`` (clear of the native
stack's); each service's ports, flags, endpoint and probe come from its native launcher, so
"healthy" means the same on both backends. Ryuk is off (its image cannot be pulled here and it
needs a bridge network): ``close()`` removes exactly the containers of its session label.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from infra.containers.names import SESSION_LABEL, image, labels
from obsingest import defaults

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

LOOPBACK = "127.0.0.1"


class ContainerError(RuntimeError):
    """A container did not become healthy; the message carries its log tail."""


def free_port() -> int:
    low, _, high = os.environ.get("OBSINGEST_TC_PORT_RANGE", "20000-29999").partition("-")
    for _ in range(200):
        port = random.randint(int(low), int(high))
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind((LOOPBACK, port))
            return port
    raise ContainerError(f"no free port in {low}-{high}")


def container_logs(container: Any, tail: int = 40) -> str:
    with contextlib.suppress(Exception):
        raw = container.get_wrapped_container().logs(tail=tail)
        return raw.decode(errors="replace")
    return "(no logs)"


class ContainerServices:
    """The four services as containers of one session, each started on first request."""

    def __init__(self, project_id: str | None = None, session: str | None = None) -> None:
        self.session = session or f"obsingest-{uuid.uuid4().hex[:10]}"
        self.project_id = project_id or os.environ.get("PUBSUB_PROJECT_ID", defaults.LOCAL_PROJECT)
        self.containers: dict[str, Any] = {}
        self.endpoints: dict[str, Any] = {}
        self.ports: dict[str, int] = {}
        self._lock = threading.Lock()
        self._futures: dict[str, Future[Any]] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="containers")

    def run(self, name: str, container: Any, probe: Any, timeout: float = 120.0, **create: Any) -> Any:
        """Start ``container`` on host networking with this session's labels (and ``create``,
        more of docker's create arguments), wait until ``probe()`` passes; on failure (also an
        exit and restart before that) remove it and raise."""
        container.ports.clear()  # host networking: no port bindings
        self.containers[name] = container.with_kwargs(network="host", labels=labels(self.session), **create)
        last: Exception | None = None
        deadline = time.monotonic() + timeout
        try:
            container.start()
        except Exception as exc:
            last, deadline = exc, 0.0
        while time.monotonic() < deadline:
            try:
                probe()
                return container
            except Exception as exc:
                last = exc
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status in ("exited", "dead") or wrapped.attrs.get("RestartCount"):
                break
            time.sleep(0.25)
        logs = container_logs(container)
        self.remove(name)
        raise ContainerError(f"{name} container ({container.image}) not healthy: {last}\n{logs}")

    def remove(self, name: str) -> None:
        if (container := self.containers.pop(name, None)) is not None:
            with contextlib.suppress(Exception):
                container.stop()

    def _native(self, name: str, **ports: int) -> Any:
        """The native launcher of ``name`` on free ports: its probe, ports and endpoint are ours."""
        from infra.local.stack import load_settings
        from infra.local.stack.stack import SERVICE_CLASSES

        cls = SERVICE_CLASSES[name]
        ports = {field: free_port() for field in cls.port_fields} | ports
        return cls(load_settings(host=LOOPBACK, pubsub_project_id=self.project_id, **ports))

    def _serve(self, native: Any, container: Any, probe: Any = None, endpoint: str = "") -> str:
        """``run`` a service's container (once per session, by ``_submit``); its endpoint."""
        self.run(native.name, container, probe or native.probe)
        self.ports[native.name] = native.ports()[0]
        self.endpoints[native.name] = endpoint = endpoint or native.endpoint
        return endpoint

    def _start_kafka(self) -> str:
        from testcontainers.core.container import DockerContainer

        from infra.local.stack.kafka_broker import properties_to_docker_env, render_server_properties

        native = self._native("kafka")
        env = properties_to_docker_env(render_server_properties(native.settings, None))
        env["KAFKA_HEAP_OPTS"] = "-Xmx512m -Xms128m"
        return self._serve(native, DockerContainer(image("kafka"), env=env))

    def _start_pubsub(self) -> tuple[str, str]:
        from testcontainers.community.google import PubSubContainer

        native = self._native("pubsub")
        port = native.settings.pubsub_port
        container = PubSubContainer(image=image("pubsub"), project=self.project_id, port=port)
        container.with_command(
            f"gcloud beta emulators pubsub start --project={self.project_id} --host-port={native.endpoint}"
        )
        return self._serve(native, container), self.project_id

    def _start_gcs(self) -> str:
        from testcontainers.core.container import DockerContainer

        self.pubsub()
        native = self._native("gcs", pubsub_port=self.ports["pubsub"])
        server = native.server("memory")
        return self._serve(native, DockerContainer(image("gcs"), env=server.env).with_command(server.argv))

    def _start_postgres(self) -> str:
        from testcontainers.community.postgres import PostgresContainer

        native = self._native("postgres")
        port = native.settings.postgres_port
        container = PostgresContainer(
            image("postgres"),
            port=port,
            username="postgres",
            password="postgres",
            dbname="postgres",
            driver="psycopg",
        )
        # throwaway: durability off, as the native backend's test clusters; not the native
        # server_options: the official image's entry point needs the Unix socket they turn off
        container.with_env("PGPORT", str(port)).with_command(
            f"postgres -c listen_addresses={LOOPBACK} -c port={port} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        url = f"postgresql+psycopg://postgres:postgres@{LOOPBACK}:{port}/postgres"
        return self._serve(native, container, lambda: _sql_ping(url), url)

    # the accessors: start on first request (or after prestart), then the same endpoint
    def kafka(self) -> str:
        """Bootstrap servers of a one-node KRaft broker (apache/kafka's KAFKA_* variables)."""
        return str(self._get("kafka"))

    def pubsub(self) -> tuple[str, str]:
        """(emulator host, project) of the Pub/Sub emulator (``gcloud beta emulators pubsub``)."""
        host, project = self._get("pubsub")
        return str(host), str(project)

    def gcs(self) -> str:
        """URL of fake-gcs-server, publishing bucket notifications to our Pub/Sub."""
        return str(self._get("gcs"))

    def postgres(self) -> str:
        """SQLAlchemy URL of the superuser's maintenance database (CREATEDB rights)."""
        return str(self._get("postgres"))

    def prestart(self, *names: str) -> None:
        """Start ``names`` side by side in the background now; the accessors wait for them."""
        for name in names:
            self._submit(name)

    def _submit(self, name: str) -> Future[Any]:
        with self._lock:
            if name not in self._futures:
                self._futures[name] = self._pool.submit(getattr(self, f"_start_{name}"))
            return self._futures[name]

    def _get(self, name: str) -> Any:
        return self._submit(name).result()

    def start_all(self, kafka: bool = True) -> dict[str, float]:
        """Every service side by side; seconds until each was healthy."""
        names = ["pubsub", "gcs", "postgres"] + (["kafka"] if kafka else [])
        started = time.monotonic()
        self.prestart(*names)
        took: dict[str, float] = {}
        for future in as_completed(futures := {self._futures[name]: name for name in names}):
            future.result()
            took[futures[future]] = time.monotonic() - started
        return took

    def container_ids(self) -> dict[str, str]:
        return {name: c.get_wrapped_container().id for name, c in self.containers.items()}

    def close(self) -> None:
        """Remove every container this session started (and nothing else), after pending starts."""
        with self._lock:
            futures = list(self._futures.values())
            self._futures.clear()
        for future in futures:
            future.exception()  # a failed start removed its own container
        for name in reversed(list(self.containers)):
            self.remove(name)
        self.endpoints.clear()
        self.ports.clear()


def _sql_ping(url: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("select 1"))
    finally:
        engine.dispose()


def leftovers(session: str) -> list[str]:
    """Names of containers (any state) still labelled with ``session``: none after close()."""
    import docker

    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session}"})
        return [c.name for c in found]
    finally:
        client.close()
