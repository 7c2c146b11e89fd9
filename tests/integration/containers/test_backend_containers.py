"""The integration fixtures really run on containers, asserted through the Docker API: every
service endpoint the fixtures hand out is a loopback port that a process of a running,
session-labelled container of the expected image listens on; and a session that closes
leaves no container behind."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import docker
import pytest

from infra.containers.names import SESSION_LABEL, image
from infra.containers.services import ContainerServices, leftovers
from tests.integration.fixtures.backends import TestcontainersBackend
from tests.integration.fixtures.handles import GcsService, KafkaService, PubSubService

pytestmark = [pytest.mark.integration, pytest.mark.containers]


def listening_pids(port: int) -> set[int]:
    """Host pids of the processes with a TCP socket listening on ``port`` (any address)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            pids.add(int(proc.name))
    return pids


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
