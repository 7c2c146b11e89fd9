"""The presence API's request counts and latencies, recorded into the metric catalogue
(``obsingest/metrics.py``: ``obsingest_presence_requests_total{route,code}``,
``obsingest_presence_request_seconds{route}``) and rendered on ``/metrics``.

``route`` is the catalogue's closed set (``ccd``, ``dataset``, ``exposure``, ``night``,
``health``, ``openapi``), mapped from the route's template, never the ids in the path, and
``code`` the status class, so the label sets stay bounded. Each app gets a registry of its own
(several apps in one process, as in tests, do not collide); the process's catalogue is the
same definitions.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from obsingest.metrics import Metrics

#: route template -> the catalogue's ``route`` label
ROUTES = {
    "/v1/ccds/{instrument}/{exposure}/{detector}": "ccd",
    "/v1/datasets/{dataset_id}": "dataset",
    "/v1/exposures/{instrument}/{exposure}": "exposure",
    "/v1/nights/{instrument}/{day_obs}": "night",
    "/healthz": "health",
    "/metrics": "health",
    "/openapi.json": "openapi",
    "/docs": "openapi",
}


class PresenceStats:
    """Requests by route and status class, and their latency by route."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.metrics = Metrics(self.registry)
        self.metrics.start("presence")

    def observe(self, route: str, code: int, seconds: float) -> None:
        self.metrics.presence_request(ROUTES.get(route, "other"), code, seconds)

    def count(self, route: str, code_class: str) -> float:
        """Requests of a catalogue ``route`` label with a status class (``2xx``...)."""
        family = self.metrics.family("obsingest_presence_requests_total")
        return float(family.labels(route=route, code=code_class)._value.get())

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
