"""The pytest plugin: ``pytest_plugins = ["obsingest_testing.plugin"]`` (or ``-p``).

Fixtures (session scope): ``obsingest_facility`` (a ``FacilityHandle``), ``obsingest_facility_factory``
(``start(kafka=False)`` for more) and ``obsingest_container_services`` (the shared service
containers; override it to reuse a session's). Everything started is removed at the end; a
facility that cannot start fails the test with its log tail, never skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from infra.containers.services import ContainerServices
from obsingest_testing.handle import FacilityHandle


@pytest.fixture(scope="session")
def obsingest_container_services() -> Iterator[ContainerServices]:
    services = ContainerServices()
    try:
        yield services
    finally:
        services.close()


@pytest.fixture(scope="session")
def obsingest_facility_factory(
    obsingest_container_services: ContainerServices,
) -> Iterator[Callable[..., FacilityHandle]]:
    from infra.containers.facility import Facility

    services = obsingest_container_services
    started: list[Facility] = []

    def start(kafka: bool = False, facility_every: float = 30.0) -> FacilityHandle:
        facility = Facility(services, kafka=kafka, facility_every=facility_every)
        started.append(facility)
        try:
            endpoints = facility.start()
        except Exception as exc:  # the message carries the container's log tail
            pytest.fail(f"the containerised facility did not start:\n{exc}", pytrace=False)
        return FacilityHandle(facility, endpoints)

    try:
        yield start
    finally:
        for facility in reversed(started):
            facility.close()


@pytest.fixture(scope="session")
def obsingest_facility(obsingest_facility_factory: Callable[..., FacilityHandle]) -> FacilityHandle:
    return obsingest_facility_factory()
