"""The downstream testing kit's fixtures (``obsingest_testing.plugin``), sharing the session's
testcontainers backend: the facility's Pub/Sub, GCS and PostgreSQL are the very containers the
integration fixtures use, so a session starts each service once."""

from __future__ import annotations

import pytest

from infra.containers.services import ContainerServices
from obsingest_testing.plugin import obsingest_facility, obsingest_facility_factory  # noqa: F401 - fixtures, re-exported for this folder
from tests.integration.fixtures.backends import Backend, TestcontainersBackend


@pytest.fixture(scope="session")
def obsingest_container_services(stack_backend: Backend) -> ContainerServices:
    """The backend's containers; these tests need the testcontainers backend and say so."""
    assert isinstance(stack_backend, TestcontainersBackend), (
        "tests/integration/containers run on OBSINGEST_TEST_BACKEND=testcontainers "
        f"(make test-containers), not {stack_backend.name!r}"
    )
    return stack_backend.services
