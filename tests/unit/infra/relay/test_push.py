"""HttpPushTarget: one POST of the envelope over a kept-alive urllib3 pool; its answer as a
PushResult (a 2xx delivers, anything else or no answer does not, a redirect is not followed)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from infra.local.relay.push import HttpPushTarget

pytestmark = pytest.mark.unit


class _Endpoint(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: ClassVar[dict[str, tuple[int, bytes, dict[str, str]]]] = {}
    seen: ClassVar[list[tuple[str, dict[str, str], Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.seen.append((self.path, dict(self.headers), json.loads(body)))
        status, text, headers = self.answers.get(self.path, (204, b"", {}))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.seen, _Endpoint.answers = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_2xx_delivers_and_connections_are_kept_alive(endpoint: str) -> None:
    target = HttpPushTarget(f"{endpoint}/push", timeout=5)
    envelope = {"message": {"data": "eA==", "messageId": "m1"}, "subscription": "s"}
    results = [target.push(envelope) for _ in range(3)]
    assert [(r.ok, r.status) for r in results] == [(True, 204)] * 3
    assert [(path, body) for path, _, body in _Endpoint.seen] == [("/push", envelope)] * 3
    assert _Endpoint.seen[0][1]["Content-Type"] == "application/json"
    assert "Authorization" not in _Endpoint.seen[0][1]
    pool = target._http.connection_from_url(endpoint)
    assert pool.num_connections == 1  # one connection for all three pushes
    target.close()


def test_an_error_answer_is_reported_with_its_body(endpoint: str) -> None:
    _Endpoint.answers = {"/busy": (503, b"registry unavailable", {})}
    result = HttpPushTarget(f"{endpoint}/busy", timeout=5).push({"message": {}})
    assert (result.ok, result.status, result.body) == (False, 503, "registry unavailable")


def test_a_redirect_is_a_failed_push_not_followed(endpoint: str) -> None:
    _Endpoint.answers = {"/moved": (302, b"", {"Location": f"{endpoint}/push"})}
    result = HttpPushTarget(f"{endpoint}/moved", timeout=5).push({"message": {}})
    assert (result.ok, result.status) == (False, 302)
    assert [path for path, _, _ in _Endpoint.seen] == ["/moved"]


def test_no_answer_is_a_result_without_status() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = HttpPushTarget(f"http://127.0.0.1:{port}/", timeout=5).push({"message": {}})
    assert result.status is None and not result.ok
    assert "Connection" in result.error or "refused" in result.error.lower()
