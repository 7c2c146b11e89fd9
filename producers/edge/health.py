"""The edge's health endpoint: ``GET /health`` -> JSON (status ready | degraded | starting |
draining | stopped, reasons, journal counts, destination, stats). HTTP 200 when ready, 503
otherwise, so ``curl -f`` or a watchdog can act on the status code alone. Standard library only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = ("/health", "/healthz", "/")


class HealthServer:
    def __init__(
        self, report: Callable[[], dict[str, Any]], host: str = "127.0.0.1", port: int = 8089
    ) -> None:
        self.httpd = ThreadingHTTPServer((host, port), _handler(report))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="edge-health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def _handler(report: Callable[[], dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in PATHS:
                self.send_error(404, "try /health")
                return
            body = report()
            data = json.dumps(body, default=str).encode()
            self.send_response(200 if body.get("status") == "ready" else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: health probes every few seconds would drown the service's log."""

    return Handler


def service_report(service: Any) -> dict[str, Any]:
    """The health document of an ``EdgeService``."""
    from producers.edge.errors import SpoolFull, SpoolUnavailable

    reasons = []
    if service.refusal.reason:
        reasons.append(service.refusal.reason)
    if service._source_problem:
        reasons.append(service._source_problem)
    scheduler = service.scheduler
    exhausted = getattr(service, "exhausted", None)
    if exhausted is not None:  # a resource ran out (destination-full, ...): an outage
        reasons.append(f"{exhausted.reason}: {str(exhausted)[:300]}; retrying until it is back")
    elif scheduler.destination_down:
        reasons.append(
            f"destination-unreachable: {scheduler.dest_failures} failed attempt(s) in a row, retrying"
        )
    status = service.state
    if status == "ready" and reasons:
        status = "degraded"
    counts: dict[str, int] = {}
    if service.journal is not None and service.state != "stopped":
        try:
            counts = service.journal.counts()
        except (SpoolFull, SpoolUnavailable):
            counts = {}
    return {
        "status": status,
        "reasons": reasons,
        "refusing_new_work": service.refusal.refusing,
        "journal": counts,
        "destination": {
            "url": service.settings.destination,
            "down": scheduler.destination_down,
            "failures": scheduler.dest_failures,
            "exhausted": exhausted.reason if exhausted is not None else None,
        },
        "stats": service.counts(),
    }
