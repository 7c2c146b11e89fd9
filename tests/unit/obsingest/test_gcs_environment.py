"""The store's transport and the library client's session (listings, provisioning) read proxies,
netrc credentials and the CA bundle from the environment once, at start-up (``HttpEnvironment``),
and still honour all three on every request, with ``trust_env=False`` so requests no longer
re-reads them per request."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from obsingest.checksums import crc32c_b64
from obsingest.store.gcs import GcsSettings, GcsStore, HttpEnvironment, make_client

pytestmark = pytest.mark.unit

ENDPOINT = "http://storage.test:4443"
PROXY = "http://proxy.test:3128"
_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NETRC", "CURL_CA_BUNDLE")


class Recorder(HTTPAdapter):
    """Answers every request as the JSON API would (the stored object resource) and keeps what
    requests would have sent: the request and its transport settings (proxies, verify)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[requests.PreparedRequest, dict[str, Any]]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append((request, kwargs))
        response = requests.Response()
        response.status_code = 200
        response.headers["content-type"] = "application/json"
        response._content = json.dumps(
            {"name": "raw/x", "size": "3", "crc32c": crc32c_b64(b"abc"), "generation": "1"}
        ).encode()
        response.url = request.url or ""
        response.request = request
        return response


@pytest.fixture
def startup_env(monkeypatch, tmp_path):
    """A proxy, a netrc entry for the endpoint's host and a CA bundle, set at start-up."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine storage.test login edge password s3cret\n")
    netrc.chmod(0o600)
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", ENDPOINT)
    monkeypatch.setenv("HTTP_PROXY", PROXY)
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    return {"bundle": str(bundle)}


def _store_with_recorder() -> tuple[GcsStore, Recorder]:
    client = make_client(GcsSettings(max_attempts=1))
    recorder = Recorder()
    client._http.mount("http://", recorder)
    client._http.mount("https://", recorder)
    return GcsStore("b", client=client), recorder


def _list(store: GcsStore) -> None:
    list(store.client.list_blobs("b", prefix="raw/"))


def test_proxy_netrc_and_ca_bundle_set_at_startup_are_honoured_by_listings(startup_env, monkeypatch):
    store, recorder = _store_with_recorder()
    # resolved at start-up: what the environment says afterwards no longer matters
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NETRC", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name)
    _list(store)
    request, transport = recorder.sent[-1]
    assert request.url is not None and request.url.startswith(f"{ENDPOINT}/storage/v1/b/b/o")
    assert transport["proxies"]["http"] == PROXY
    assert transport["verify"] == startup_env["bundle"]
    expected = base64.b64encode(b"edge:s3cret").decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert store.client._http.trust_env is False


def test_the_environment_is_not_read_per_request(startup_env, monkeypatch):
    """What made the upload slow: requests' per-request reads of the environment and netrc."""
    store, _recorder = _store_with_recorder()
    calls: list[str] = []
    import requests.sessions
    import requests.utils

    def counting(name: str) -> Any:
        real = getattr(requests.utils, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    for name in ("get_environ_proxies", "get_netrc_auth"):
        monkeypatch.setattr(requests.sessions, name, counting(name))
    _list(store)
    assert calls == []


def test_no_proxy_exempts_the_endpoint(startup_env, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "storage.test")
    store, recorder = _store_with_recorder()
    _list(store)
    _request, transport = recorder.sent[-1]
    assert transport["proxies"] == {}


def test_netrc_credentials_go_to_their_host_only(startup_env):
    env = HttpEnvironment.resolve(ENDPOINT)
    session = env.apply(requests.Session())
    recorder = Recorder()
    session.mount("http://", recorder)
    session.get("http://elsewhere.test/x")
    session.get(f"{ENDPOINT}/storage/v1/b/b/o/x")
    (other, _), (ours, _) = recorder.sent
    assert "Authorization" not in other.headers
    assert ours.headers["Authorization"].startswith("Basic ")


def test_without_anything_set_requests_defaults_hold(monkeypatch):
    for name in (*_ENV, "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")
    env = HttpEnvironment.resolve(ENDPOINT)
    assert env.proxies == {} and env.netrc_auth is None and env.verify is True


class _Proxy:
    """A forward HTTP proxy on localhost that answers every request itself (as the JSON API
    would) and keeps each request line and headers."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen: list[tuple[str, dict[str, str]]] = []
        self.seen = seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                seen.append((self.requestline, dict(self.headers)))
                body = json.dumps(
                    {"name": "raw/x", "size": "3", "crc32c": crc32c_b64(b"abc"), "generation": "1"}
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_lean_store_honours_the_startup_proxy_netrc_and_ca_bundle(startup_env, monkeypatch):
    """``GcsStore``'s uploads go through the proxy set at start-up, with the proxy URL's
    credentials, send the netrc entry's credentials, and verify with the CA bundle, as the
    library's requests session does."""
    proxy = _Proxy()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://pu:pp@127.0.0.1:{proxy.port}")
        store = GcsStore("b", GcsSettings(max_attempts=1))
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "NETRC", "REQUESTS_CA_BUNDLE"):
            monkeypatch.delenv(name)
        assert store.put("raw/x", b"abc").created
    finally:
        proxy.close()
    (line, headers), *_ = proxy.seen
    assert line.startswith(f"POST {ENDPOINT}/upload/storage/v1/b/b/o?")  # absolute: via proxy
    lower = {k.lower(): v for k, v in headers.items()}
    assert lower["authorization"] == "Basic " + base64.b64encode(b"edge:s3cret").decode()
    assert lower["proxy-authorization"] == "Basic " + base64.b64encode(b"pu:pp").decode()
    assert store.http.http.connection_pool_kw["ca_certs"] == startup_env["bundle"]


def test_the_lean_store_without_a_proxy_goes_direct(monkeypatch):
    from obsingest.store.gcs import authorized_http

    for name in (*_ENV, "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")
    http = authorized_http(GcsSettings(), ENDPOINT)
    import urllib3

    assert type(http.http) is urllib3.PoolManager


def test_the_lean_store_reads_the_environment_once_for_both_transports(startup_env, monkeypatch):
    """Its own transport and the library's client (made on first use) share one reading."""
    reads: list[str] = []
    resolve = HttpEnvironment.resolve.__func__  # type: ignore[attr-defined]

    def counted(cls: type[HttpEnvironment], endpoint: str) -> HttpEnvironment:
        reads.append(endpoint)
        return resolve(cls, endpoint)

    monkeypatch.setattr(HttpEnvironment, "resolve", classmethod(counted))
    store = GcsStore("b", GcsSettings(max_attempts=1))
    assert store.client._http.auth.host == "storage.test"  # the netrc entry, applied
    assert reads == [ENDPOINT]
