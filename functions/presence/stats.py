"""The presence API's request counts and latencies: one small object, rendered on ``/metrics``.

Names and labels are those of the metric catalogue (``obsingest_presence_requests_total{route,
code}``, ``obsingest_presence_request_seconds{route}``): ``route`` is the route's template, never
the ids in the path, and ``code`` the status class, so the label sets stay bounded. They live in
a registry of their own (not prometheus_client's global one), so several apps in one process
(tests) do not collide, and the catalogue can take them over as they are.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

#: sub-millisecond to a second: where a presence lookup's latency lives
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


def status_class(code: int) -> str:
    return f"{code // 100}xx" if 100 <= code <= 599 else "other"


class PresenceStats:
    """Requests by route and status class, and their latency by route."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "obsingest_presence_requests",
            "Presence API requests, by route and status class.",
            ("route", "code"),
            registry=self.registry,
        )
        self.seconds = Histogram(
            "obsingest_presence_request_seconds",
            "Presence API request latency, by route.",
            ("route",),
            buckets=BUCKETS,
            registry=self.registry,
        )

        # label children by key: routes are a handful, and a lookup through labels() takes a lock
        self._children: dict[tuple[str, int], tuple[Any, Any]] = {}

    def observe(self, route: str, code: int, seconds: float) -> None:
        children = self._children.get((route, code))
        if children is None:
            children = (self.requests.labels(route, status_class(code)), self.seconds.labels(route))
            self._children[(route, code)] = children
        children[0].inc()
        children[1].observe(seconds)

    def count(self, route: str, code_class: str) -> float:
        return self.requests.labels(route, code_class)._value.get()

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
