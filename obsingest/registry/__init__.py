"""Butler-like dataset registry: SQLite file by default, PostgreSQL in production."""

from obsingest.registry.registry import (
    ExposureRecord,
    FileRecord,
    QuarantineEntry,
    Registration,
    Registry,
    RegistryUnavailable,
)

__all__ = [
    "ExposureRecord",
    "FileRecord",
    "QuarantineEntry",
    "Registration",
    "Registry",
    "RegistryUnavailable",
]
