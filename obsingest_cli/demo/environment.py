"""What the demo needs from a deployment of the pipeline (``DemoEnvironment``) and from a way
of moving CCDs (``DemoTransport``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from obsingest.messages import ArrivalEvent, ExposureManifest
from obsingest.registry import Registry
from obsingest.settings import BusSettings, StoreSettings
from obsingest.store.base import ObjectStore, StoredObject

ArrivalCallback = Callable[[ArrivalEvent], None]
ManifestCallback = Callable[[ExposureManifest], None]


class DemoEnvironment(Protocol):
    #: where edge workers upload (file://DIR or gs://BUCKET); also where assemblers write
    store_url: str
    store_settings: StoreSettings
    bus_settings: BusSettings

    @property
    def store(self) -> ObjectStore: ...

    registry: Registry

    def start(self, on_arrival: ArrivalCallback, on_manifest: ManifestCallback | None) -> None:
        """Bring up delivery (finalize -> register function) and the demo's subscribers
        (``on_manifest`` None: no subscriber on the exposures topic, one poller fewer)."""

    def publish_manifest(self, manifest: ExposureManifest) -> None: ...

    def inject_notification(self, obj: StoredObject) -> None:
        """Deliver a finalize notification for ``obj`` as the store's notifier would (tests)."""

    def finish(self, timeout: float) -> int:
        """Wait until every pending notification is handled; returns the dead-lettered count."""

    def close(self) -> None: ...


class DemoTransport(Protocol):
    """The ``sender_url`` edge workers send to, and whatever must run at the facility for it."""

    sender_url: str

    def start(self) -> None: ...

    def finish(self, timeout: float) -> None:
        """Wait until everything sent has reached the store."""

    def processes(self) -> dict[str, list[int]]:
        """Facility services it runs as processes of their own (role -> pids)."""

    def close(self) -> None: ...
