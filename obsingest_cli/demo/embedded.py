"""The embedded environment: no services at all (``make demo``'s default).

SQLite registry, local-directory store, in-process bus. The store's finalize outbox is delivered
by ``OutboxDispatcher`` to the register function's CloudEvent entry point, and each
ExposureManifest on the bus is pushed to its ``on_manifest``, as Cloud Functions would.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from obsingest.bus.memory import InMemoryBus, Message
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureManifest
from obsingest.registry import open_registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store.base import StoredObject
from obsingest.store.notifications import storage_cloudevent
from obsingest_cli.demo.environment import ArrivalCallback, ManifestCallback

if TYPE_CHECKING:
    from obsingest.store.dispatch import OutboxDispatcher

log = get_logger("obsingest.demo.embedded")


class EmbeddedEnvironment:
    def __init__(self, workdir: Path, registry_url: str | None = None) -> None:
        from obsingest.store.local import LocalDirStore

        self.store_url = f"file://{workdir / 'store'}"
        self.store_settings = StoreSettings(url=self.store_url)
        self.bus_settings = BusSettings()
        self.registry = open_registry(
            RegistrySettings(url=registry_url or f"sqlite:///{workdir / 'registry.sqlite3'}")
        )
        self.store = LocalDirStore(workdir / "store")
        self.bus = InMemoryBus()
        self._dispatcher: OutboxDispatcher | None = None

    def start(self, on_arrival: ArrivalCallback, on_manifest: ManifestCallback | None) -> None:
        from cloudevents.http import from_dict

        from functions.register import main as register_function
        from functions.register import wiring
        from obsingest.store.dispatch import OutboxDispatcher

        self.bus.subscribe(
            self.bus_settings.arrivals_topic, lambda m: on_arrival(ArrivalEvent.decode(m.data))
        )
        if on_manifest is not None:
            self.bus.subscribe(
                self.bus_settings.exposures_topic, lambda m: on_manifest(ExposureManifest.decode(m.data))
            )
        self.bus.subscribe(self.bus_settings.exposures_topic, self._record_manifest)
        wiring.configure(
            wiring.build_service(self.store, self.registry, self.bus, self.store_settings, self.bus_settings)
        )
        self._dispatcher = OutboxDispatcher(
            self.store.outbox(), lambda event: register_function.on_object_finalized(from_dict(event))
        )
        self._dispatcher.start()

    def publish_manifest(self, manifest: ExposureManifest) -> None:
        self.bus.publish(
            self.bus_settings.exposures_topic,
            manifest.encode(),
            key=f"{manifest.instrument}/{manifest.exposure}",
        )

    def _record_manifest(self, message: Message) -> None:
        """Push the manifest to the register function's ``on_manifest``, as the relay would."""
        from functions.register import main as register_function
        from infra.local.relay.policy import push_envelope
        from infra.local.relay.push import InProcessTarget
        from obsingest.bus.pull import Delivery

        delivery = Delivery("", message.message_id, message.data, message.attributes)
        result = InProcessTarget(register_function.on_manifest).push(
            push_envelope(delivery, "embedded-exposures")
        )
        if not result.ok:
            log_event(
                log, "demo.manifest_not_recorded", logging.WARNING, status=result.status, reply=result.body
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
