"""Butler-like dataset registry: SQLite file by default, PostgreSQL in production, or a real
daf_butler repository (``butler:<repo>``, needs ``obsingest[butler]``). ``open_registry`` is the
one place that picks the backend, so callers hold settings, not classes."""

from obsingest.registry.butler_repo import is_butler_url
from obsingest.registry.db_errors import RegistryUnavailable
from obsingest.registry.outbox import OutboxMessage
from obsingest.registry.registry import (
    Announcer,
    ExposureRecord,
    FileRecord,
    QuarantineEntry,
    Registration,
    Registry,
)
from obsingest.settings import RegistrySettings

__all__ = [
    "Announcer",
    "ExposureRecord",
    "FileRecord",
    "OutboxMessage",
    "QuarantineEntry",
    "Registration",
    "Registry",
    "RegistryUnavailable",
    "open_registry",
]


def open_registry(settings: RegistrySettings, migrate_schema: bool = True) -> Registry:
    """The registry at ``settings.url``, schema migrated unless told otherwise."""
    if is_butler_url(settings.url):
        from obsingest.registry.butler import ButlerRegistry

        return ButlerRegistry.open(settings, migrate_schema)
    return Registry.open(settings, migrate_schema)
