"""Butler-like dataset registry: SQLite file by default, PostgreSQL in production, or a real
daf_butler repository (``butler:<repo>``). ``open_registry`` opens whichever a URL names."""

from obsingest.registry.backends import open_registry
from obsingest.registry.outbox import OutboxMessage
from obsingest.registry.registry import (
    Announcer,
    ExposureRecord,
    FileRecord,
    QuarantineEntry,
    Registration,
    Registry,
    RegistryUnavailable,
)

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
