"""Build the register service from settings: the only place that picks concrete adapters.

The process-wide instance lives here rather than in ``main``: functions-framework loads
``main.py`` from its path as a module of its own, and the state must be shared with code that
imports ``functions.register`` normally (in-process delivery, tests).
"""

from __future__ import annotations

import threading

from functions.register.service import RegisterService
from obsingest.bus.factory import open_publisher
from obsingest.registry import Registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store import open_store


def service_from_settings() -> RegisterService:
    store_settings = StoreSettings()
    bus = BusSettings()
    return RegisterService(
        store=open_store(store_settings),
        registry=Registry.open(RegistrySettings()),
        publisher=open_publisher(bus),
        arrivals_topic=bus.arrivals_topic,
        prefix=store_settings.prefix,
        quarantine_prefix=store_settings.quarantine_prefix,
    )


_lock = threading.Lock()
_service: RegisterService | None = None


def configure(service: RegisterService | None) -> None:
    """Inject a service (in-process delivery, tests); None resets to settings-built."""
    global _service
    with _lock:
        _service = service


def get_service() -> RegisterService:
    """The process's service, built from settings on first use."""
    global _service
    with _lock:
        if _service is None:
            _service = service_from_settings()
        return _service
