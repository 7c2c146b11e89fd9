"""The integration fixtures really run on containers, asserted through the Docker API: every
service endpoint the fixtures hand out is a loopback port that a process of a running,
session-labelled container of the expected image listens on, and the container listens on
nothing but 127.0.0.1; and a session that closes leaves no container behind."""

from __future__ import annotations

from urllib.parse import urlsplit

import docker
import pytest

from infra.containers.names import SESSION_LABEL, image
from infra.containers.services import ContainerServices, leftovers
from tests.integration.containers.procnet import listening_addresses, listening_pids
from tests.integration.fixtures.backends import TestcontainersBackend
from tests.integration.fixtures.handles import GcsService, KafkaService, PubSubService

pytestmark = [pytest.mark.integration, pytest.mark.containers]


def test_every_service_is_a_running_container_of_this_session(
    stack_backend: TestcontainersBackend,
    kafka: KafkaService,
    pubsub: PubSubService,
    gcs: GcsService,
    postgres_server: object,
) -> None:
    assert isinstance(stack_backend, TestcontainersBackend)
    ports = {
        "kafka": int(kafka.bootstrap_servers.rsplit(":", 1)[1]),
        "pubsub": int(str(pubsub.emulator_host).rsplit(":", 1)[1]),
        "gcs": int(urlsplit(str(gcs.endpoint)).port or 0),
        "postgres": stack_backend.services.ports["postgres"],
    }
    client = docker.from_env()
    try:
        label = f"{SESSION_LABEL}={stack_backend.session}"
        ours = {c.id: c for c in client.containers.list(filters={"label": label})}
        for service, container_id in stack_backend.services.container_ids().items():
            if service not in ports:
                continue  # a facility component: test_facility_e2e looks at those
            container = ours[container_id]
            assert container.status == "running"
            assert image(service) in container.image.tags
            assert container.attrs["HostConfig"]["NetworkMode"] == "host"
            top = container.top()
            column = top["Titles"].index("PID")
            pids = {int(row[column]) for row in top["Processes"]}
            listeners = listening_pids(ports[service])
            assert listeners and listeners <= pids, (service, ports[service], listeners, pids)
            # traffic stays on loopback: the container listens on 127.0.0.1 only
            assert {addr for addr, _ in listening_addresses(pids)} == {"127.0.0.1"}, service
        assert set(ports) <= set(stack_backend.services.container_ids())
    finally:
        client.close()


def test_a_closed_session_leaves_no_container_behind() -> None:
    services = ContainerServices()
    try:
        services.pubsub()
        services.gcs()
        assert sorted(services.container_ids()) == ["gcs", "pubsub"]
        assert len(leftovers(services.session)) == 2
    finally:
        services.close()
    assert leftovers(services.session) == []
