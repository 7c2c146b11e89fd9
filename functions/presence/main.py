"""Process entry point of the presence API (``obsingest serve``, ``python -m functions.presence``):
uvicorn, scaled by instances behind a load balancer or worker processes on one port."""

from __future__ import annotations

import os
import sys
from typing import Any

from fastapi import FastAPI

from functions.presence.app import create_app
from functions.presence.settings import PresenceSettings
from obsingest.logs import get_logger, log_event
from obsingest.registry.presence import PresenceReader
from obsingest.settings import PipelineSettings, RegistrySettings

log = get_logger("obsingest.presence")


def build_app(
    registry_url: str | None = None,
    budget_seconds: float | None = None,
    settings: PresenceSettings | None = None,
) -> FastAPI:
    """The app on ``registry_url`` (default ``OBSINGEST_REGISTRY_URL``); uvicorn's factory too."""
    settings = settings or PresenceSettings()
    registry = RegistrySettings(url=registry_url) if registry_url else RegistrySettings()
    budget = budget_seconds if budget_seconds is not None else PipelineSettings().budget_seconds
    reader = PresenceReader.open(registry, budget, settings.cache_exposures)
    return create_app(reader, settings)


def serve(
    registry_url: str | None = None,
    host: str | None = None,
    port: int | None = None,
    budget_seconds: float | None = None,
    workers: int | None = None,
) -> int:
    """Serve until interrupted; the exit status. Worker processes build their app from the
    environment, so the arguments are passed on through it."""
    import uvicorn

    updates = {k: v for k, v in (("host", host), ("port", port), ("workers", workers)) if v}
    settings = PresenceSettings().model_copy(update=updates)
    where = f"presence API on http://{settings.host}:{settings.port}/"
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "loop": "uvloop",
        "http": "httptools",
        "access_log": settings.access_log,
        "log_level": "warning",
        # a load balancer in front keeps connections open: the server must not close first
        "timeout_keep_alive": 75,
    }
    if settings.workers > 1:
        if registry_url:
            os.environ["OBSINGEST_REGISTRY_URL"] = registry_url
        if budget_seconds is not None:
            os.environ["OBSINGEST_BUDGET_SECONDS"] = str(budget_seconds)
        build_app().state.reader.close()  # fail here, once, if the registry cannot be read
        print(f"{where} with {settings.workers} worker processes", file=sys.stderr, flush=True)
        uvicorn.run("functions.presence.main:build_app", factory=True, workers=settings.workers, **options)
        return 0
    app = build_app(registry_url, budget_seconds, settings)
    reader: PresenceReader = app.state.reader
    log_event(log, "presence.serving", host=settings.host, port=settings.port, registry=reader.source)
    print(f"{where} (OpenAPI: /openapi.json) reading {reader.source}", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, **options)
    finally:
        reader.close()
    return 0
