"""The data facility as containers: ``ContainerServices``, one namespace provisioned from the
host as ``obsingest setup`` does, and the ``obsingest`` image as the register function, relay,
facility service, presence API and (with Kafka) the assembler, each ready when its HTTP
endpoint answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import requests

from infra.containers.names import image
from infra.containers.services import LOOPBACK, ContainerServices, free_port

#: the components' restart policy: on a non-zero exit, with no limit
RESTART = {"Name": "on-failure", "MaximumRetryCount": 0}


@dataclass(frozen=True)
class FacilityEndpoints:
    """Where the containerised facility answers, and the namespace it was given."""

    project: str
    bucket: str
    pubsub_emulator_host: str
    storage_emulator_host: str
    registry_url: str
    function_url: str
    presence_url: str
    kafka_bootstrap: str | None = None
    chunks_topic: str | None = None
    containers: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The variables a client (or an obsingest process) reads to find the facility."""
        env = {
            "PUBSUB_EMULATOR_HOST": self.pubsub_emulator_host,
            "STORAGE_EMULATOR_HOST": self.storage_emulator_host,
            "PUBSUB_PROJECT_ID": self.project,
            "GOOGLE_CLOUD_PROJECT": self.project,
            "OBSINGEST_GCS_PROJECT": self.project,
            "OBSINGEST_BUS_BACKEND": "pubsub",
            "OBSINGEST_BUS_PUBSUB_PROJECT": self.project,
            "OBSINGEST_STORE_URL": f"gs://{self.bucket}",
            "OBSINGEST_REGISTRY_URL": self.registry_url,
        }
        if self.kafka_bootstrap:
            env["KAFKA_BOOTSTRAP_SERVERS"] = self.kafka_bootstrap
        return env


def environ(values: dict[str, str]) -> Any:
    """``os.environ`` with ``values`` for the duration of a ``with`` (the Google clients read it)."""
    return mock.patch.dict(os.environ, values)


class Facility:
    """Starts the facility's containers; ``close()`` removes them and drops the namespace."""

    def __init__(
        self,
        services: ContainerServices | None = None,
        *,
        kafka: bool = False,
        facility_every: float = 30.0,
        tag: str = "facility",
    ) -> None:
        self.services = services or ContainerServices()
        self.owns_services = services is None
        self.kafka = kafka
        self.facility_every = facility_every
        self.run_id = f"{tag}-{uuid.uuid4().hex[:8]}"
        self.names: list[str] = []
        self.endpoints: FacilityEndpoints | None = None
        self._admin_url = ""
        #: the namespace's database, once made (dropped by close() even if start() failed)
        self._registry_url = ""
        self._timeout = 120.0

    def start(self, timeout: float = 120.0) -> FacilityEndpoints:
        services, self._timeout = self.services, timeout
        services.prestart("pubsub", "gcs", "postgres", *(["kafka"] if self.kafka else []))
        pubsub_host, _ = services.pubsub()
        gcs_url = services.gcs()
        self._admin_url = services.postgres()
        bootstrap = services.kafka() if self.kafka else None
        project = bucket = self.run_id
        chunks = f"ccd-chunks-{self.run_id}" if self.kafka else None
        registry_url = self._registry_url = self._provision(pubsub_host, gcs_url, bootstrap, chunks)
        function_port, presence_port = free_port(), free_port()
        endpoints = FacilityEndpoints(
            project=project,
            bucket=bucket,
            pubsub_emulator_host=pubsub_host,
            storage_emulator_host=gcs_url,
            registry_url=registry_url,
            function_url=f"http://{LOOPBACK}:{function_port}/",
            presence_url=f"http://{LOOPBACK}:{presence_port}",
            kafka_bootstrap=bootstrap,
            chunks_topic=chunks,
        )
        env = {
            **endpoints.env(),
            "OBSINGEST_REGISTRY_POOL_SIZE": "4",
            "OBSINGEST_FUNCTION_PUSH_AUTH": "false",
        }
        register = ["register", "on_push", "--host", LOOPBACK, "--port", str(function_port)]
        self._component("register", register, env, _http_ok(endpoints.function_url, any_status=True))
        self._metered("relay", ["relay", "--push-url", endpoints.function_url], env)
        self._metered("facility", ["facility"], {**env, "OBSINGEST_FACILITY_EVERY": str(self.facility_every)})
        presence = ["presence", "--registry", registry_url, "--host", LOOPBACK, "--port", str(presence_port)]
        self._component("presence", presence, env, _http_ok(f"{endpoints.presence_url}/healthz"))
        if bootstrap and chunks:
            assembler = ["assembler", "--bootstrap-servers", bootstrap, "--topic", chunks]
            assembler += ["--dlq-topic", f"{chunks}-dlq", "--group", f"assembler-{self.run_id}"]
            self._metered("assembler", [*assembler, "--store", f"gs://{bucket}"], env)
        self.endpoints = dataclasses.replace(endpoints, containers=services.container_ids())
        return self.endpoints

    def _provision(self, pubsub_host: str, gcs_url: str, bootstrap: str | None, chunks: str | None) -> str:
        """``obsingest setup``'s provisioning of namespace ``run_id``, plus a migrated registry."""
        from infra.local.provision import create_chunk_topics, create_database, setup
        from obsingest.registry import Registry
        from obsingest.settings import BusSettings, RegistrySettings
        from obsingest.store.gcs import GcsSettings, GcsStore

        project = bucket = self.run_id
        hosts = {"PUBSUB_EMULATOR_HOST": pubsub_host, "STORAGE_EMULATOR_HOST": gcs_url}
        with environ({**hosts, "GOOGLE_CLOUD_PROJECT": project}):
            store = GcsStore(bucket, settings=GcsSettings(project=project))
            bus = BusSettings(backend="pubsub", pubsub_project=project)
            setup(bucket, bus, storage_client=store.client, kafka_bootstrap=bootstrap)
        if bootstrap and chunks:
            create_chunk_topics(bootstrap, {chunks: 6, f"{chunks}-dlq": 1})
        registry_url = self._registry_url = create_database(self._admin_url, self.run_id.replace("-", "_"))
        Registry.open(RegistrySettings(url=registry_url)).close()  # the schema, migrated
        return registry_url

    def _component(self, name: str, command: list[str], env: dict[str, str], ready: Any) -> None:
        """A component's container, started again by the engine whenever it exits with an error
        (a crash, an OOM kill) once it was ready, as its platform restarts a service: each
        resumes from what it holds durably. Docker's waits between restarts double to a minute."""
        from testcontainers.core.container import DockerContainer

        container = DockerContainer(image("obsingest"), env=env).with_command(command)
        key = f"{name}-{self.run_id}"
        self.names.append(key)
        self.services.run(key, container, ready, self._timeout, restart_policy=RESTART)

    def _metered(self, name: str, command: list[str], env: dict[str, str]) -> None:
        """A component whose readiness is its Prometheus endpoint answering."""
        port = free_port()
        env = {**env, "OBSINGEST_METRICS_PORT": str(port), "OBSINGEST_METRICS_ADDR": LOOPBACK}
        self._component(name, command, env, _http_ok(f"http://{LOOPBACK}:{port}/metrics"))

    def logs(self, name: str, tail: int = 200) -> str:
        """The log tail of component ``name`` (register, relay, facility, presence, assembler)."""
        from infra.containers.services import container_logs

        return container_logs(self.services.containers[f"{name}-{self.run_id}"], tail)

    def close(self) -> None:
        """Remove the component containers (and the services if this facility started them)."""
        from infra.local.provision import drop_database

        for key in reversed(self.names):
            self.services.remove(key)
        self.names.clear()
        if self._registry_url and not self.owns_services:
            with contextlib.suppress(Exception):
                drop_database(self._admin_url, self._registry_url)
            self._registry_url = ""
        if self.owns_services:
            self.services.close()


def _http_ok(url: str, any_status: bool = False) -> Any:
    def probe() -> None:
        response = requests.get(url, timeout=2)
        if not any_status:
            response.raise_for_status()

    return probe
