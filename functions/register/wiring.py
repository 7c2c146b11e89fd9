"""Build the register service from settings: the only place that picks concrete adapters. The
process-wide instance lives here, not in ``main``, which functions-framework loads by path.
"""

from __future__ import annotations

import gc
import logging
import threading

from functions.register.service import RegisterService
from obsingest.bus.base import Publisher
from obsingest.bus.factory import open_publisher
from obsingest.logs import get_logger, log_event
from obsingest.registry import Registry, open_registry
from obsingest.settings import BusSettings, PipelineSettings, RegistrySettings, StoreSettings
from obsingest.store import ObjectStore, open_store


def build_service(
    store: ObjectStore,
    registry: Registry,
    publisher: Publisher,
    store_settings: StoreSettings,
    bus: BusSettings,
) -> RegisterService:
    """The register service on given adapters, topics, prefixes and budget from settings."""
    from obsingest.metrics import get_metrics

    metrics = get_metrics()
    metrics.start("register")
    return RegisterService(
        store=store,
        registry=registry,
        publisher=publisher,
        arrivals_topic=bus.arrivals_topic,
        ingested_topic=bus.exposures_ingested_topic,
        budget_seconds=PipelineSettings().budget_seconds,
        prefix=store_settings.prefix,
        quarantine_prefix=store_settings.quarantine_prefix,
        metrics=metrics,
    )


def service_from_settings() -> RegisterService:
    """Adapters picked from settings (``OBSINGEST_STORE_*``, ``_REGISTRY_*``, ``_BUS_*``)."""
    store_settings = StoreSettings()
    bus = BusSettings()
    return build_service(
        open_store(store_settings),
        open_registry(RegistrySettings()),
        open_publisher(bus),
        store_settings,
        bus,
    )


_lock = threading.Lock()
_service: RegisterService | None = None


def configure(service: RegisterService | None) -> None:
    """Inject a service (in-process delivery, tests); None resets to settings-built."""
    global _service
    with _lock:
        _service = service


def get_service() -> RegisterService:
    """The process's service, built on first use; ``gc.freeze`` keeps full collections from
    walking what start-up made."""
    global _service
    with _lock:
        if _service is None:
            _service = service_from_settings()
            gc.freeze()
        return _service


def warm_up() -> None:
    """Build the service before the first request; a failure is logged (a delivery retries it)."""
    try:
        get_service()
    except Exception as exc:  # start-up must not die of what a delivery can retry
        log = get_logger("obsingest.register.wiring")
        log_event(log, "register.warm_up.failed", logging.WARNING, error=f"{type(exc).__name__}: {exc}")
