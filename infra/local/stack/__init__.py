"""The local service stack: real Kafka, Pub/Sub, GCS and PostgreSQL as native processes.

``obsingest stack up|down|status|env|fetch`` and the integration-test fixtures drive it; see
``infra/local/`` for the pinned artefacts (Kafka pom, the pstest server) and the compose file.
"""

from __future__ import annotations

from infra.local.stack.errors import FetchError, StackError
from infra.local.stack.settings import StackSettings, load_settings
from infra.local.stack.stack import Stack, render_exports, render_status_table

__all__ = [
    "FetchError",
    "Stack",
    "StackError",
    "StackSettings",
    "load_settings",
    "render_exports",
    "render_status_table",
]
