"""Open the registry a URL names: SQLite or PostgreSQL (``registry.Registry``), or a real
daf_butler repository with ``butler:<repo>`` (``registry.butler``, needs ``obsingest[butler]``).

The one place that picks the backend, so callers hold settings, not classes.
"""

from __future__ import annotations

from obsingest.registry.butler_repo import is_butler_url
from obsingest.registry.registry import Registry
from obsingest.settings import RegistrySettings


def open_registry(settings: RegistrySettings, migrate_schema: bool = True) -> Registry:
    """The registry at ``settings.url``, schema migrated unless told otherwise."""
    if is_butler_url(settings.url):
        from obsingest.registry.butler import ButlerRegistry

        return ButlerRegistry.open(settings, migrate_schema)
    return Registry.open(settings, migrate_schema)
