"""The local service stack: real Kafka, Pub/Sub, GCS and PostgreSQL as native processes,
driven by ``obsingest stack`` and the integration-test fixtures."""

from __future__ import annotations

from infra.local.stack.errors import StackError
from infra.local.stack.settings import StackSettings, load_settings
from infra.local.stack.stack import Stack, render_exports, render_status_table

__all__ = ["Stack", "StackError", "StackSettings", "load_settings", "render_exports", "render_status_table"]
