"""The pipeline under test, deployed as it would be: real processes on services of the suite's own.

One ``World`` per scenario, on the suite's private services (``PrivateStack``: a Pub/Sub
emulator, a GCS emulator and a durable PostgreSQL on free ports; a Kafka broker for the Kafka
scenarios), with a namespace of its own (Pub/Sub project, bucket, database), so a scenario that
restarts or crashes a service never touches the shared stack or another helper's work:

    obsingest daq night  ->  hand-off dir  ->  python -m producers.edge (spool, journal)
        -> gs://bucket (GCS emulator)           [or kafka:// -> python -m functions.assembler -> gs://]
        -> notification -> Pub/Sub emulator -> obsingest relay -> functions-framework (register)
        -> PostgreSQL registry (+ outbox) -> ccd-arrivals -> the observer (counts every delivery)
    obsingest reconcile --every N  (the facility service: canary, repair, reconcile, drain, redrive)

With ``manifests``, the DAQ also publishes each ExposureManifest on ``exposures`` (``daq night
--publish-manifests``): a second relay on ``exposures-relay`` pushes it to a second
functions-framework process serving ``on_manifest``, and every complete exposure's
ExposureIngested on ``exposures-ingested`` is counted by a second observer (``ingested``).

Optionally a toxiproxy sits between the edge and the GCS emulator (``store_link``) and between
the register function and PostgreSQL (``registry_link``), and the spool lives on a small tmpfs
(``spool_mb``) that a fault can fill. With ``kafka_disk_mb`` the world runs a Kafka broker of its
own (not the suite's shared one) whose log directory is a small tmpfs (tests/chaos/disks.py), so
filling it and letting the broker halt never touches another scenario's broker.

One cohesive concept: the deployed pipeline of one scenario, its processes and their services.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from tests.chaos.observer import ArrivalsObserver, IngestedObserver
from tests.integration.fixtures.edge import EdgeProcess
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.private_stack import PrivateStack, free_port
from tests.integration.fixtures.service_process import ROOT, ServiceProcess
from tests.integration.fixtures.toxiproxy import Proxy, Toxiproxy

INSTRUMENT = "LSSTCam"
DAY_OBS = 20261122
#: the edge's flags in every world: bad files are judged within seconds, an outage is probed
#: every 2 s at most (a scenario's own flags come after and win)
EDGE_ARGS = (
    "--workers",
    "2",
    "--rescan-interval",
    "5",
    "--incomplete-timeout",
    "5",
    "--retry-max-delay",
    "2",
)
#: variables of the caller's environment never handed to the pipeline's processes: each World
#: sets its own endpoints and namespace
_OWN = ("OBSINGEST_", "PUBSUB_", "STORAGE_EMULATOR", "KAFKA_", "GOOGLE_CLOUD_PROJECT")


@dataclass(frozen=True)
class WorldOptions:
    transport: str = "direct"  # "direct" | "kafka"
    #: OBSINGEST_RELAY_<KEY> for the relay (and the facility's repair, which re-provisions
    #: the relay subscription with the same delivery policy)
    relay: dict[str, str] = field(default_factory=dict)
    #: OBSINGEST_RECONCILE_<KEY> / OBSINGEST_REDRIVE_<KEY>, e.g. {"RECONCILE_GRACE": "10"}
    facility: dict[str, str] = field(default_factory=dict)
    facility_every: float = 10.0
    edge_args: tuple[str, ...] = ()
    store_link: bool = False
    registry_link: bool = False
    spool_mb: int = 0
    #: serve /metrics from every process on a free port of its own (``World.metrics_urls``)
    metrics: bool = False
    #: the DAQ publishes manifests; the manifests relay + ``on_manifest`` function record them
    #: and ``World.ingested`` counts the ExposureIngested events
    manifests: bool = False
    #: an HTTP fault proxy between the edge and the GCS emulator (``World.store_fault``): a
    #: fault can make the store answer 429 / 503 / quota 403 (tests/chaos/exhaustion.py)
    store_fault: bool = False
    #: the registry database in a tablespace on a tmpfs of this many MB (``World.registry_disk``)
    #: that a fault can fill
    registry_disk_mb: int = 0
    #: the GCS emulator's directory of the bucket on a tmpfs of this many MB (``World.gcs_disk``)
    gcs_disk_mb: int = 0
    #: a Kafka broker of the world's own (not the suite's) whose log directory is a tmpfs of
    #: this many MB (``World.kafka_disk``) that a fault can fill; with ``transport="kafka"``
    kafka_disk_mb: int = 0
    #: the registry is a daf_butler repository made by the real ``butler create`` with its
    #: registry on the world's PostgreSQL (obsingest's companion tables in a database of their
    #: own); the scenario counts from the Butler itself (``World.butler_datasets``)
    butler: bool = False


class World:
    def __init__(
        self,
        name: str,
        stack: PrivateStack,
        workdir: Path,
        options: WorldOptions,
        kafka: PrivateStack | None = None,
    ) -> None:
        self.name = name
        self.stack = stack
        self.kafka_stack = kafka
        self.options = options
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.handoff = workdir / "handoff"
        self.spool = workdir / "spool"
        for path in (self.logs, self.handoff, self.spool):
            path.mkdir(parents=True, exist_ok=True)
        run_id = uuid.uuid4().hex[:8]
        # a project id has at most 30 characters (GCS's notification topics are checked)
        self.project = f"cx{run_id}-{name}"[:30].rstrip("-")
        self.bucket = f"chaos-{name}-{run_id}"
        self.admin_url = stack.env()["OBSINGEST_REGISTRY_URL"]
        self.registry_url = ""
        self.spool_mounted = False
        self.toxiproxy: Toxiproxy | None = None
        self.store_proxy: Proxy | None = None
        self.registry_proxy: Proxy | None = None
        self.chunks_topic = f"chunks-{run_id}"
        self.observer: ArrivalsObserver | None = None
        self.ingested: IngestedObserver | None = None
        self.registry: Any = None
        self.store: Any = None
        self.bus: Any = None
        self.function: FunctionProcess | None = None
        self.relay: ServiceProcess | None = None
        self.manifest_function: FunctionProcess | None = None
        self.manifest_relay: ServiceProcess | None = None
        self.facility: ServiceProcess | None = None
        self.assembler: ServiceProcess | None = None
        self.edge: EdgeProcess | None = None
        self.daq: ServiceProcess | None = None
        #: process name -> its /metrics URL (when ``options.metrics``)
        self.metrics_urls: dict[str, str] = {}
        self.store_fault: Any = None
        self.registry_disk: Path | None = None
        self.registry_tablespace = ""
        self.gcs_disk: Path | None = None
        self.kafka_disk: Path | None = None
        #: with ``options.butler``: the repository, its databases, the companion's URL
        self.butler_repo = ""
        self.butler_databases: list[str] = []
        self.companion_url = ""
        self._butler: Any = None

    # environment -------------------------------------------------------------------------------
    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
        env.update(self.stack.env())
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "GOOGLE_CLOUD_PROJECT": self.project,
                "PUBSUB_PROJECT_ID": self.project,
                "OBSINGEST_GCS_PROJECT": self.project,
                "OBSINGEST_BUS_BACKEND": "pubsub",
                "OBSINGEST_BUS_PUBSUB_PROJECT": self.project,
                "OBSINGEST_STORE_URL": f"gs://{self.bucket}",
                "OBSINGEST_REGISTRY_URL": self.registry_url,
                "OBSINGEST_REGISTRY_POOL_SIZE": "4",
                "OBSINGEST_FUNCTION_PUSH_AUTH": "false",
            }
        )
        if self.companion_url:
            env["OBSINGEST_BUTLER_COMPANION_URL"] = self.companion_url
        env.update({f"OBSINGEST_RELAY_{k.upper()}": str(v) for k, v in self.options.relay.items()})
        env.update({f"OBSINGEST_{k.upper()}": str(v) for k, v in self.options.facility.items()})
        if self.kafka_stack is not None:
            env["KAFKA_BOOTSTRAP_SERVERS"] = self.kafka_bootstrap
        return env

    @property
    def kafka_bootstrap(self) -> str:
        assert self.kafka_stack is not None
        return self.kafka_stack.env()["KAFKA_BOOTSTRAP_SERVERS"]

    def relay_settings(self) -> Any:
        from infra.local.relay.settings import RelaySettings

        return RelaySettings(**cast(dict[str, Any], {k.lower(): v for k, v in self.options.relay.items()}))

    # start -------------------------------------------------------------------------------------
    def start(self) -> World:
        """Provision the namespace and start every process (the DAQ comes with ``play``)."""
        from infra.local.provision import create_chunk_topics, create_database, setup
        from obsingest import defaults
        from obsingest.registry import Registry
        from obsingest.settings import BusSettings, RegistrySettings
        from obsingest.store.gcs import GcsSettings, GcsStore

        if self.options.kafka_disk_mb:  # first: every process below needs its address
            from tests.chaos.disks import kafka_broker_on_small_disk

            self.kafka_stack, self.kafka_disk = kafka_broker_on_small_disk(self.options.kafka_disk_mb)
        if self.options.registry_disk_mb:
            from tests.chaos.disks import create_database_on, mount_registry_disk

            self.registry_disk = mount_registry_disk(
                self.stack, self.bucket[-8:], self.options.registry_disk_mb
            )
            self.registry_url, self.registry_tablespace = create_database_on(
                self.admin_url, self.registry_disk, "chaos"
            )
        elif self.options.butler:
            self.registry_url = self._butler_repo()
        else:
            self.registry_url = create_database(self.admin_url, "chaos")
        if self.options.butler:
            self.registry = self._open_butler_registry()
        else:
            self.registry = Registry.open(RegistrySettings(url=self.registry_url, retry_deadline=5.0))
        self.bus = BusSettings(backend="pubsub", pubsub_project=self.project)
        self.store = GcsStore(self.bucket, settings=GcsSettings(project=self.project))
        setup(
            self.bucket,
            self.bus,
            prefixes=defaults.NOTIFIED_PREFIXES,
            storage_client=self.store.client,
            relay=self.relay_settings(),
        )
        if self.options.gcs_disk_mb:  # the bucket is still empty: nothing hidden by the mount
            from tests.chaos.disks import mount_gcs_disk

            self.gcs_disk = mount_gcs_disk(self.stack, self.bucket, self.options.gcs_disk_mb)
        self.observer = ArrivalsObserver(self.project, self.bus.arrivals_topic).start()
        if self.options.manifests:
            self.ingested = IngestedObserver(self.project, self.bus.exposures_ingested_topic)
            self.ingested.start()
        if self.options.spool_mb:
            self._mount_spool(self.options.spool_mb)
        env = self.base_env()
        function_env = dict(env)
        edge_env = dict(env)
        if self.options.store_link or self.options.registry_link:
            self.toxiproxy = Toxiproxy(self.logs / "toxiproxy.log")
        if self.options.store_link:
            assert self.toxiproxy is not None
            upstream = urlsplit(env["STORAGE_EMULATOR_HOST"]).netloc
            self.store_proxy = self.toxiproxy.proxy("store", upstream)
            edge_env["STORAGE_EMULATOR_HOST"] = f"http://{self.store_proxy.address}"
        if self.options.store_fault:
            from tests.integration.fixtures.http_fault import HttpFaultProxy

            self.store_fault = HttpFaultProxy(env["STORAGE_EMULATOR_HOST"]).start()
            edge_env["STORAGE_EMULATOR_HOST"] = f"http://{self.store_fault.address}"
        if self.options.registry_link:
            from sqlalchemy.engine import make_url

            assert self.toxiproxy is not None
            url = make_url(self.registry_url)
            self.registry_proxy = self.toxiproxy.proxy("registry", f"{url.host}:{url.port}")
            function_env["OBSINGEST_REGISTRY_URL"] = url.set(
                host="127.0.0.1", port=self.registry_proxy.listen_port
            ).render_as_string(hide_password=False)
        python = sys.executable
        self.function = FunctionProcess(function_env, self.logs / "function.log", free_port())
        if self.options.metrics:  # the function answers /metrics on its own port
            self.metrics_urls["function"] = f"{self.function.url}metrics"
        self.relay = ServiceProcess(
            "relay",
            [python, "-m", "obsingest_cli", "relay", "--push-url", self.function.url],
            self._metrics_env("relay", env),
            self.logs,
        )
        if self.options.manifests:
            self._manifest_processes(function_env, env)
        self.facility = ServiceProcess(
            "facility",
            [python, "-m", "obsingest_cli", "reconcile", "--every", str(self.options.facility_every)],
            self._metrics_env("facility", env),
            self.logs,
        )
        destination = f"gs://{self.bucket}"
        if self.options.transport == "kafka":
            from functions.assembler.main import command

            dlq = f"{self.chunks_topic}-dlq"
            create_chunk_topics(self.kafka_bootstrap, {self.chunks_topic: 6, dlq: 1})
            destination = f"kafka://{self.kafka_bootstrap}/{self.chunks_topic}"
            self.assembler = ServiceProcess(
                "assembler",
                command(
                    self.kafka_bootstrap,
                    self.chunks_topic,
                    dlq,
                    f"assembler-{self.project}",
                    f"gs://{self.bucket}",
                ),
                self._metrics_env("assembler", env),
                self.logs,
            )
        self.edge = EdgeProcess(
            self.handoff,
            self.spool,
            destination,
            self.logs / "edge",
            None,
            *EDGE_ARGS,
            *self.options.edge_args,
        )
        self.edge.env = self._metrics_env("edge", edge_env)
        # the two slow starters (imports on a busy machine) come up side by side
        functions = [f for f in (self.function, self.manifest_function) if f is not None]
        with ThreadPoolExecutor(3) as pool:
            waits: list[Future[Any]] = [pool.submit(f.start, 90) for f in functions]
            waits.append(pool.submit(self.edge.start))
            for proc in (self.relay, self.manifest_relay, self.facility, self.assembler):
                if proc is not None:
                    proc.start()
            for wait in waits:
                wait.result()
        return self

    def _butler_repo(self) -> str:
        """A repository from the real ``butler create`` (fixtures/butler.py), its registry on
        the world's PostgreSQL; its ``butler:`` URL."""
        from tests.integration.fixtures.butler import new_repo
        from tests.integration.fixtures.handles import PostgresServer

        url, made, companion = new_repo("postgresql", self.workdir / "repo", PostgresServer(self.admin_url))
        self.butler_databases, self.companion_url = made, companion or ""
        self.butler_repo = str((self.workdir / "repo").resolve())
        return url

    def _open_butler_registry(self) -> Any:
        """The harness's own handle on the Butler backend (outbox, quarantine, counts), built
        with the world's companion rather than the caller's environment."""
        from lsst.daf.butler import Butler

        from obsingest.registry.butler import ButlerRegistry
        from obsingest.registry.butler_repo import ButlerSettings
        from obsingest.registry.engine import make_engine
        from obsingest.registry.migrations import migrate
        from obsingest.settings import RegistrySettings

        settings = RegistrySettings(url=self.registry_url, retry_deadline=5.0)
        companion = settings.model_copy(update={"url": self.companion_url})
        registry = ButlerRegistry(
            make_engine(companion),
            settings,
            ButlerSettings(companion_url=self.companion_url),
            Butler.from_config(self.butler_repo, writeable=True),
            self.butler_repo,
        )
        migrate(registry.engine)
        return registry

    def butler_datasets(self) -> list[tuple[str, str, str]]:
        """Every ``raw`` the Butler holds, in any collection, straight from daf_butler (not
        obsingest's code or tables): (data id key, dataset id, URI) each. A fresh Butler per
        count after a failure (its connections die with a PostgreSQL crash)."""
        from lsst.daf.butler import Butler

        for attempt in range(10):
            try:
                if self._butler is None:
                    self._butler = Butler.from_config(self.butler_repo)
                butler = self._butler
                butler.registry.refresh()  # it caches dataset types: raw is registered later
                if "raw" not in {t.name for t in butler.registry.queryDatasetTypes()}:
                    return []
                refs = butler.registry.queryDatasets("raw", collections="*", findFirst=False)
                return [
                    (
                        f"{ref.dataId['instrument']}/{ref.dataId['exposure']}/{ref.dataId['detector']:03d}",
                        str(ref.id),
                        str(butler.getURI(ref)),
                    )
                    for ref in refs
                ]
            except Exception:
                if self._butler is not None:
                    with contextlib.suppress(Exception):
                        self._butler.close()
                self._butler = None
                if attempt == 9:
                    raise
                time.sleep(0.5)
        return []

    def _manifest_processes(self, function_env: dict[str, str], env: dict[str, str]) -> None:
        """The register function serving ``on_manifest`` and the relay on ``exposures-relay``
        pushing to it (dead letters to ``exposures-dlq``), as ``obsingest setup`` provisions."""
        from obsingest import defaults

        assert self.bus is not None
        self.manifest_function = FunctionProcess(
            function_env, self.logs / "manifest-function.log", free_port(), target="on_manifest"
        )
        if self.options.metrics:
            self.metrics_urls["manifest-function"] = f"{self.manifest_function.url}metrics"
        self.manifest_relay = ServiceProcess(
            "manifest-relay",
            [
                sys.executable,
                "-m",
                "obsingest_cli",
                "relay",
                "--subscription",
                defaults.MANIFEST_RELAY_SUBSCRIPTION,
                "--dead-letter-topic",
                self.bus.exposures_dlq_topic,
                "--push-url",
                self.manifest_function.url,
            ],
            self._metrics_env("manifest-relay", env),
            self.logs,
        )

    def _metrics_env(self, name: str, env: dict[str, str]) -> dict[str, str]:
        """``env`` with a /metrics port of the process's own when the world serves metrics."""
        if not self.options.metrics:
            return env
        port = free_port()
        self.metrics_urls[name] = f"http://127.0.0.1:{port}/metrics"
        return {**env, "OBSINGEST_METRICS_PORT": str(port)}

    def _mount_spool(self, megabytes: int) -> None:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(self.spool)], check=True
        )
        self.spool_mounted = True

    def play(self, exposures: int, detectors: int, interval: float, first_seq: int = 1) -> None:
        """Start the DAQ night player (``obsingest daq night``) as its own process."""
        argv = [
            sys.executable,
            "-m",
            "obsingest_cli",
            "daq",
            "night",
            str(self.handoff),
            "--instrument",
            INSTRUMENT,
            "--exposures",
            str(exposures),
            "--detectors",
            str(detectors),
            "--interval",
            str(interval),
            "--size",
            "small",
            "--day-obs",
            str(DAY_OBS),
            "--first-seq",
            str(first_seq),
        ]
        if self.options.manifests:
            argv.append("--publish-manifests")
        self.daq = ServiceProcess("daq", argv, self.base_env(), self.logs).start()

    def read(self, fn: Any, attempts: int = 10) -> Any:
        """A registry read by the harness, retried while PostgreSQL restarts (the pool's
        connections die with the server; each failure invalidates one)."""
        from sqlalchemy.exc import OperationalError

        for attempt in range(attempts):
            try:
                return fn()
            except OperationalError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5)
        return None

    # processes by name -------------------------------------------------------------------------
    def process(self, name: str) -> Any:
        proc = getattr(self, name)
        assert proc is not None, f"{name} is not part of this world"
        return proc

    @contextlib.contextmanager
    def publishers_held(self) -> Any:
        """Freeze the processes that publish ArrivalEvents (function, facility) for a moment:
        while a topic and its subscription come back, nothing may be published in between."""
        held = [p for p in (self.function, self.manifest_function, self.facility) if p is not None]
        for proc in held:
            _signal_group(proc, "SIGSTOP")
        try:
            yield
        finally:
            for proc in held:
                _signal_group(proc, "SIGCONT")

    # end ---------------------------------------------------------------------------------------
    def close(self) -> None:
        from infra.local.provision import drop_database

        for proc in (self.daq, self.edge, self.assembler, self.facility, self.relay, self.manifest_relay):
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.close()
        import signal

        for function in (self.function, self.manifest_function):
            if function is not None:
                with contextlib.suppress(Exception):
                    function.stop(signal.SIGKILL)
        for observer in (self.observer, self.ingested):
            if observer is not None:
                observer.stop()
        if self.toxiproxy is not None:
            self.toxiproxy.close()
        if self.store_fault is not None:
            self.store_fault.close()
        if self._butler is not None:
            with contextlib.suppress(Exception):
                self._butler.close()
        if self.registry is not None:
            with contextlib.suppress(Exception):
                self.registry.close()
            if not self.options.butler:
                with contextlib.suppress(Exception):
                    drop_database(self.admin_url, self.registry_url)
        for database in self.butler_databases:
            with contextlib.suppress(Exception):
                drop_database(self.admin_url, database)
        if self.registry_disk is not None:
            from tests.chaos.disks import drop_registry_disk

            drop_registry_disk(self.admin_url, self.registry_tablespace, self.registry_disk)
        if self.store is not None:
            with contextlib.suppress(Exception):
                for blob in self.store.client.list_blobs(self.bucket):
                    blob.delete()
                self.store.client.bucket(self.bucket).delete()
        if self.spool_mounted:
            subprocess.run(["umount", "-l", str(self.spool)], check=False)
        if self.gcs_disk is not None:
            subprocess.run(["umount", "-l", str(self.gcs_disk)], check=False)
        if self.kafka_disk is not None:  # the broker of its own, stopped before its disk goes
            from tests.chaos.disks import drop_kafka_disk

            drop_kafka_disk(self.kafka_stack, self.kafka_disk)


def _signal_group(proc: Any, name: str) -> None:
    import signal

    popen = proc.proc
    if popen is not None and popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, getattr(signal, name))
