"""Service fixtures for integration tests: real Kafka, Pub/Sub, GCS and PostgreSQL.

The backend is chosen by ``OBSINGEST_TEST_BACKEND``: ``native`` (default; the launchers of
``obsingest stack``, started on demand and stopped at session end only if this session started
them), ``testcontainers`` (official images; needs Docker) or ``external`` (endpoints from
KAFKA_BOOTSTRAP_SERVERS, PUBSUB_EMULATOR_HOST / PUBSUB_PROJECT_ID, STORAGE_EMULATOR_HOST,
OBSINGEST_REGISTRY_URL). A service that cannot start FAILS the tests that need it, with the
service's own log tail: integration tests are never skipped for want of a service.

Each fixture also exports the endpoint into ``os.environ`` for the session, so code under test
that reads the standard variables finds the same service.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from tests.integration.fixtures.backends import Backend, make_backend
from tests.integration.fixtures.handles import GcsService, KafkaService, PostgresServer, PubSubService

T = TypeVar("T")


@pytest.fixture(scope="session")
def _saved_environ() -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def stack_backend(_saved_environ: None) -> Iterator[Backend]:
    """The session's service backend; closing it stops only what it started."""
    backend = make_backend()
    yield backend
    backend.close()


def _provide(service: str, backend: Backend, get: Callable[[], T]) -> T:
    try:
        return get()
    except Exception as exc:  # the message of a StackError carries the service's log tail
        pytest.fail(f"{service} is not available from the {backend.name!r} backend:\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def kafka(stack_backend: Backend) -> Iterator[KafkaService]:
    """Kafka bootstrap servers and ``new_topic()`` for a fresh, unique topic."""
    bootstrap = _provide("kafka", stack_backend, stack_backend.kafka)
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    handle = KafkaService(bootstrap_servers=bootstrap)
    yield handle
    handle.cleanup()


@pytest.fixture(scope="session")
def pubsub(stack_backend: Backend) -> Iterator[PubSubService]:
    """Pub/Sub emulator host and project; ``new_topic()`` / ``new_subscription()`` factories."""
    host, project = _provide("pubsub", stack_backend, stack_backend.pubsub)
    if host:
        os.environ["PUBSUB_EMULATOR_HOST"] = host
    os.environ["PUBSUB_PROJECT_ID"] = project
    os.environ["GOOGLE_CLOUD_PROJECT"] = project
    handle = PubSubService(emulator_host=host, project_id=project)
    yield handle
    handle.cleanup()


@pytest.fixture(scope="session")
def gcs(stack_backend: Backend, pubsub: PubSubService) -> Iterator[GcsService]:
    """GCS endpoint (emulator URL or None for real GCS) and ``new_bucket()``.

    Depends on ``pubsub`` because bucket notifications are published there.
    """
    endpoint = _provide("gcs", stack_backend, stack_backend.gcs)
    if endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
    handle = GcsService(endpoint=endpoint, project_id=pubsub.project_id)
    yield handle
    handle.cleanup()


@pytest.fixture(scope="session")
def postgres_server(stack_backend: Backend) -> PostgresServer:
    """The PostgreSQL server; tests normally want ``postgres`` (a fresh database) instead."""
    url = _provide("postgres", stack_backend, stack_backend.postgres)
    os.environ["OBSINGEST_REGISTRY_URL"] = url
    return PostgresServer(admin_url=url)


@pytest.fixture
def postgres(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for this test: its SQLAlchemy URL; dropped afterwards."""
    url = postgres_server.create_database(f"t_{request.node.name[:30]}")
    yield url
    postgres_server.drop_database(url)
