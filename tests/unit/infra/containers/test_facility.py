"""``Facility`` on stand-in services (no engine): what it made is removed by ``close()`` also
when ``start()`` failed halfway."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import infra.local.provision
from infra.containers.facility import Facility
from infra.containers.names import RUN_ENV
from infra.containers.services import ContainerError

pytestmark = pytest.mark.unit


class Container:
    def __init__(self, image: str, env: dict[str, str]) -> None:
        self.image = image

    def with_command(self, command: list[str]) -> Container:
        return self


class Services:
    """Shared services whose first component container never becomes healthy."""

    def prestart(self, *names: str) -> None:
        pass

    def pubsub(self) -> tuple[str, str]:
        return "127.0.0.1:1", "p"

    def gcs(self) -> str:
        return "http://127.0.0.1:2"

    def postgres(self) -> str:
        return "postgresql+psycopg://postgres@127.0.0.1:3/postgres"

    def run(self, name: str, container: Any, probe: Any, timeout: float, **create: Any) -> Any:
        raise ContainerError(f"{name} container not healthy")

    def remove(self, name: str) -> None:
        pass


def test_a_facility_that_failed_to_start_drops_its_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its database was dropped only once start() had returned: a facility whose component did
    not come up (the plugin fails the test, the session goes on) left its database in the
    shared PostgreSQL, one per failed start, for as long as those services lived."""
    import testcontainers.core.container

    monkeypatch.setattr(testcontainers.core.container, "DockerContainer", Container)
    dropped: list[str] = []
    monkeypatch.setattr(infra.local.provision, "drop_database", lambda admin, url: dropped.append(url))
    facility = Facility(Services())  # type: ignore[arg-type]  # the part of ContainerServices used
    made = f"postgresql+psycopg://postgres@127.0.0.1:3/{facility.run_id.replace('-', '_')}"
    monkeypatch.setattr(facility, "_provision", lambda *args: made)
    with pytest.raises(ContainerError):
        facility.start()
    facility.close()
    assert dropped == [made]


class Created(Container):
    """What reaches docker's create: the arguments ``with_kwargs`` was given last."""

    made: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, image: str, env: dict[str, str]) -> None:
        super().__init__(image, env)
        self.ports: dict[str, Any] = {}
        self.kwargs: dict[str, Any] = {}

    def with_kwargs(self, **kwargs: Any) -> Created:
        self.kwargs = kwargs  # as testcontainers: replaced, not merged
        return self

    def start(self) -> None:
        Created.made.append(self.kwargs)
        raise RuntimeError("no engine here")

    def stop(self) -> None:
        pass


def test_the_components_are_restarted_by_the_engine_when_they_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The components ran without a restart policy: one that crashed (or was OOM-killed) stayed
    down, its work undone until someone noticed. They run with docker's `on-failure` policy."""
    import testcontainers.core.container

    from infra.containers.services import ContainerServices

    monkeypatch.setattr(testcontainers.core.container, "DockerContainer", Created)
    monkeypatch.delenv(RUN_ENV, raising=False)  # the run's label too, under test-containers.sh
    services = ContainerServices(session="s")
    for name, value in (("pubsub", ("127.0.0.1:1", "p")), ("gcs", "http://127.0.0.1:2"), ("postgres", "pg")):
        monkeypatch.setattr(services, name, lambda value=value: value)
    monkeypatch.setattr(services, "prestart", lambda *names: None)
    monkeypatch.setattr(infra.local.provision, "drop_database", lambda admin, url: None)
    facility = Facility(services)
    monkeypatch.setattr(facility, "_provision", lambda *args: "postgresql+psycopg://p@127.0.0.1:3/f")
    with pytest.raises(ContainerError, match="no engine here"):
        facility.start()
    facility.close()
    [created] = Created.made
    assert created["restart_policy"] == {"Name": "on-failure", "MaximumRetryCount": 0}
    assert created["network"] == "host" and created["labels"] == {"org.obsingest.session": "s"}
