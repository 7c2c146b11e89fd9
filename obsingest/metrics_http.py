"""Serving ``/metrics`` from a long-running process: on a port of its own in a background thread
(``serve_metrics``, ``OBSINGEST_METRICS_PORT``), or as a path of a WSGI app on the app's port
(``with_metrics_endpoint``, for the Flask app functions-framework runs)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app, start_http_server
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest.errors import PermanentError


class MetricsPortUnavailable(PermanentError, reason="metrics-port-unavailable"):
    """The configured metrics port cannot be bound (in use, or privileged)."""


class MetricsSettings(BaseSettings):
    """Where a long-running process serves ``/metrics`` (``OBSINGEST_METRICS_PORT``, 0 = off)."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_METRICS_", extra="ignore")

    port: int = Field(default=0, ge=0, le=65535)
    #: All interfaces by default: Prometheus scrapes from another host.
    addr: str = "0.0.0.0"


@dataclass
class MetricsServer:
    """A background ``/metrics`` HTTP server (daemon thread); ``close()`` stops it."""

    server: Any
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(
    settings: MetricsSettings | None = None, registry: CollectorRegistry | None = None
) -> MetricsServer | None:
    """Serve ``/metrics`` in a background thread on the configured port; None when port is 0."""
    settings = MetricsSettings() if settings is None else settings
    if settings.port == 0:
        return None
    try:
        server, thread = start_http_server(
            settings.port, settings.addr, REGISTRY if registry is None else registry
        )
    except OSError as exc:
        raise MetricsPortUnavailable(
            f"cannot serve /metrics on {settings.addr}:{settings.port} (OBSINGEST_METRICS_PORT): {exc}"
        ) from exc
    return MetricsServer(server, thread)


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_metrics_endpoint(app: WsgiApp, registry: CollectorRegistry | None = None) -> WsgiApp:
    """Wrap a WSGI app so ``/metrics`` answers with the metrics, on the app's own port (Flask's:
    ``app.wsgi_app = with_metrics_endpoint(app.wsgi_app)``)."""
    metrics_app = make_wsgi_app(REGISTRY if registry is None else registry)

    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        served = metrics_app if environ.get("PATH_INFO") == "/metrics" else app
        body: Iterable[bytes] = served(environ, start_response)
        return body

    return dispatch
