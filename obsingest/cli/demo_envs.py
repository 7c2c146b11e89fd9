"""Where the demo runs: the services behind the pipeline.

``embedded`` needs nothing: SQLite registry, local-directory store whose finalize notifications
are delivered in-process to the register function, in-process bus. ``local`` runs the same flow
on the real local stack (GCS emulator, Pub/Sub emulator, PostgreSQL; see ``obsingest stack``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from obsingest.bus.memory import InMemoryBus
from obsingest.messages import ArrivalEvent, ExposureManifest
from obsingest.notifications import storage_cloudevent
from obsingest.registry import Registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store.base import ObjectStore, StoredObject

ArrivalCallback = Callable[[ArrivalEvent], None]
ManifestCallback = Callable[[ExposureManifest], None]


class DemoEnvironment(Protocol):
    """What the demo needs from a deployment of the pipeline."""

    #: where edge workers upload (file://DIR or gs://BUCKET); also where assemblers write
    store_url: str
    store_settings: StoreSettings
    bus_settings: BusSettings
    store: ObjectStore
    registry: Registry

    def start(self, on_arrival: ArrivalCallback, on_manifest: ManifestCallback) -> None:
        """Bring up delivery (finalize -> register function) and the demo's subscribers."""

    def publish_manifest(self, manifest: ExposureManifest) -> None: ...

    def inject_notification(self, obj: StoredObject) -> None:
        """Deliver a finalize notification for ``obj`` as the store's notifier would (tests)."""

    def finish(self, timeout: float) -> int:
        """Wait until every pending notification is handled; returns the dead-lettered count."""

    def close(self) -> None: ...


class EmbeddedEnvironment:
    """No services at all: the default of ``make demo``."""

    def __init__(self, workdir: Path, registry_url: str | None = None) -> None:
        from obsingest.store.local import LocalDirStore

        self.store_url = f"file://{workdir / 'store'}"
        self.store_settings = StoreSettings(url=self.store_url)
        self.bus_settings = BusSettings()
        self.registry = Registry.open(
            RegistrySettings(url=registry_url or f"sqlite:///{workdir / 'registry.sqlite3'}")
        )
        self.store = LocalDirStore(workdir / "store")
        self.bus = InMemoryBus()
        self._dispatcher = None
        self._lock = threading.Lock()

    def start(self, on_arrival: ArrivalCallback, on_manifest: ManifestCallback) -> None:
        from cloudevents.http import from_dict

        from functions.register import main as register_function
        from functions.register import wiring
        from functions.register.service import RegisterService
        from obsingest.store.dispatch import OutboxDispatcher

        self.bus.subscribe(
            self.bus_settings.arrivals_topic,
            lambda m: on_arrival(ArrivalEvent.decode(m.data)),
        )
        self.bus.subscribe(
            self.bus_settings.exposures_topic,
            lambda m: on_manifest(ExposureManifest.decode(m.data)),
        )
        wiring.configure(
            RegisterService(
                store=self.store,
                registry=self.registry,
                publisher=self.bus,
                arrivals_topic=self.bus_settings.arrivals_topic,
                prefix=self.store_settings.prefix,
                quarantine_prefix=self.store_settings.quarantine_prefix,
            )
        )
        # In-process delivery to the very entry point Cloud Functions would call.
        self._dispatcher = OutboxDispatcher(
            self.store.outbox(),
            lambda event: register_function.on_object_finalized(from_dict(event)),
        )
        self._dispatcher.start()

    def publish_manifest(self, manifest: ExposureManifest) -> None:
        self.bus.publish(
            self.bus_settings.exposures_topic,
            manifest.encode(),
            key=f"{manifest.instrument}/{manifest.exposure}",
        )

    def inject_notification(self, obj: StoredObject) -> None:
        self.store.outbox().inject(storage_cloudevent(obj))

    def finish(self, timeout: float) -> int:
        if self._dispatcher is None:
            return 0
        self._dispatcher.stop(drain=True, timeout=timeout)
        return self._dispatcher.dead_lettered

    def close(self) -> None:
        from functions.register import wiring

        if self._dispatcher is not None:  # stop delivering before the service goes away
            self._dispatcher.stop(drain=False)
        wiring.configure(None)
        self.registry.close()


def make_environment(
    stack: str, workdir: Path, keep: bool = True, registry_url: str | None = None
) -> DemoEnvironment:
    """``keep=False``: the local stack's per-run bucket and database are deleted on close
    (benchmark runs store gigabytes nobody looks at again). ``registry_url``: the embedded
    stack's registry (e.g. ``butler:<repo>``) instead of SQLite in the workdir."""
    if stack == "embedded":
        return EmbeddedEnvironment(workdir, registry_url)
    if registry_url:
        raise ValueError("--registry applies to the embedded stack only")
    if stack == "local":
        from obsingest.cli.demo_env_local import LocalStackEnvironment

        return LocalStackEnvironment(workdir, keep=keep)
    raise ValueError(f"unknown --stack {stack!r} (embedded, local)")


__all__ = ["DemoEnvironment", "EmbeddedEnvironment", "make_environment"]
