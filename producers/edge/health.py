"""The edge's health endpoint: ``GET /health`` -> the service's ``health()`` as JSON; HTTP 200
when ready, 503 otherwise, so ``curl -f`` or a watchdog can act on the status code alone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = ("/health", "/healthz", "/")


class HealthServer:
    def __init__(self, report: Callable[[], dict[str, Any]], host: str, port: int) -> None:
        self.httpd = ThreadingHTTPServer((host, port), _handler(report))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="edge-health", daemon=True)
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
