"""Butler-like dataset registry: SQLite file by default, PostgreSQL in production."""

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
]
