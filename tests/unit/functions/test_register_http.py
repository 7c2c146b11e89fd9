"""The register function's HTTP edge: body limits before anything reads the body, the one
error-to-reply mapping, and push-auth signing keys fetched once per their Cache-Control."""

import io
import json
import time
from pathlib import Path

import pytest
from functions_framework import create_app

from functions.register import http_errors, main, wiring
from functions.register.request_guard import body_guard, read_bounded
from obsingest.errors import BadMessage, NestingTooDeep, NotADelivery, RequestTooLarge, RetriableError

pytestmark = pytest.mark.unit

SOURCE = str(Path(main.__file__))
LIMIT = 1024 * 1024


@pytest.fixture
def wired(env):
    wiring.configure(env.service)
    yield env
    wiring.configure(None)


class Endless:
    """A request stream of unknown length (chunked upload) that counts what was read of it."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        self.read_bytes += n
        return b" " * n


def test_declared_length_over_the_limit_is_413_without_reading(wired):
    stream = Endless(100 * LIMIT)
    environ = {"CONTENT_LENGTH": str(100 * LIMIT), "wsgi.input": stream}
    with pytest.raises(RequestTooLarge, match="104857600 bytes is over the 1048576-byte limit"):
        read_bounded(environ, LIMIT)
    assert stream.read_bytes == 0
    for target, kind in (("on_push", "http"), ("on_object_finalized", "cloudevent")):
        client = create_app(target, SOURCE, kind).test_client()
        response = client.post("/", data=b"x" * (LIMIT + 1), content_type="application/json")
        assert response.status_code == 413, target
        assert b"request-too-large" in response.data
    assert wired.registry.quarantined() == []


def test_streamed_body_over_the_limit_is_413_after_limit_bytes(wired):
    stream = Endless(100 * LIMIT)
    environ = {"wsgi.input": stream, "wsgi.input_terminated": True}
    with pytest.raises(RequestTooLarge, match="streamed"):
        read_bounded(environ, LIMIT)
    assert stream.read_bytes == LIMIT + 1
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    app = create_app("on_push", SOURCE, "http")
    environ = EnvironBuilder(method="POST", content_type="application/json").get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ.update({"wsgi.input": Endless(3 * LIMIT), "wsgi.input_terminated": True})
    _body, status, _headers = run_wsgi_app(app, environ)
    assert status.startswith("413")


def test_body_guard_hands_on_an_accepted_body_with_its_length():
    seen = {}

    def app(environ, start_response):
        seen["body"] = environ["wsgi.input"].read()
        seen["length"] = environ["CONTENT_LENGTH"]
        start_response("200 OK", [])
        return [b"ok"]

    guard = body_guard(app, lambda: LIMIT, http_errors.reply_for)
    environ = {"wsgi.input": io.BytesIO(b'{"a": 1}'), "wsgi.input_terminated": True}
    assert guard(environ, lambda status, headers: None) == [b"ok"]
    assert seen == {"body": b'{"a": 1}', "length": "8"}


@pytest.mark.parametrize(
    ("environ", "error"),
    [
        ({"CONTENT_LENGTH": "ten"}, "not a number"),
        ({"CONTENT_LENGTH": "-5"}, "negative"),
        ({"CONTENT_LENGTH": "100", "wsgi.input": io.BytesIO(b"short")}, "after 5 of its 100"),
    ],
)
def test_bad_lengths_are_refused_as_not_a_delivery(environ, error):
    with pytest.raises(NotADelivery, match=error):
        read_bounded(environ, LIMIT)


def test_no_length_and_no_terminated_stream_means_no_body():
    assert read_bounded({"wsgi.input": Endless(10)}, LIMIT) == b""


def test_deep_json_is_refused_before_parsing_on_both_entry_points(wired):
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    for target, kind, ctype in (
        ("on_push", "http", "application/json"),
        ("on_object_finalized", "cloudevent", "application/cloudevents+json"),
    ):
        client = create_app(target, SOURCE, kind).test_client()
        response = client.post("/", data=deep, headers={"Content-Type": ctype})
        assert response.status_code == 400 and b"nesting-too-deep" in response.data


def test_requests_that_are_not_deliveries_get_4xx_and_no_record(wired):
    client = create_app("on_push", SOURCE, "http").test_client()
    assert client.get("/").status_code == 405
    for body in (b"not json", b"[1, 2]", b'{"message": "x"}', b"{}"):
        response = client.post("/", data=body, content_type="application/json")
        assert response.status_code == 400 and b"not-a-delivery" in response.data
    ce = create_app("on_object_finalized", SOURCE, "cloudevent").test_client()
    for body in (b"{", b'{"specversion": 7}', b"\xff\xfe"):
        response = ce.post("/", data=body, headers={"Content-Type": "application/cloudevents+json"})
        assert response.status_code == 400
    assert wired.registry.quarantined() == []


def test_the_one_mapping_from_errors_to_replies():
    from werkzeug.exceptions import MethodNotAllowed

    assert http_errors.reply_for(RetriableError("db down"))[1] == 503
    assert http_errors.reply_for(RequestTooLarge("big"))[1] == 413
    assert http_errors.reply_for(NestingTooDeep("deep"))[1] == 400
    assert http_errors.reply_for(NotADelivery("what"))[1] == 400
    assert http_errors.reply_for(BadMessage("unquarantinable"))[1] == 400
    assert http_errors.reply_for(MethodNotAllowed())[1] == 405
    assert http_errors.reply_for(KeyError("bug"), before_entry=True)[1] == 400
    assert http_errors.reply_for(RecursionError())[1] == 400
    body, status = http_errors.reply_for(KeyError("bug"))
    assert status == 500 and body == "internal error: KeyError"  # a bug stays visible
    body, _ = http_errors.reply_for(RetriableError("x" * 10_000))
    assert len(body) < 700


def test_endpoint_limits_are_settings(monkeypatch, wired):
    monkeypatch.setenv("OBSINGEST_FUNCTION_MAX_REQUEST_BYTES", "2048")
    monkeypatch.setenv("OBSINGEST_FUNCTION_RETRY_AFTER_SECONDS", "3")
    client = create_app("on_push", SOURCE, "http").test_client()
    assert client.post("/", data=b"{}" * 1025, content_type="application/json").status_code == 413

    def down(*a, **k):
        from obsingest.registry import RegistryUnavailable

        raise RegistryUnavailable("down")

    monkeypatch.setattr(wired.registry, "quarantine", down)
    message = {"message": {"data": "!!", "attributes": {"eventType": "OBJECT_FINALIZE"}}}
    response = client.post("/", json=message)
    assert response.status_code == 503 and response.headers["Retry-After"] == "3"


# -- push auth: signing keys cached per Cache-Control ---------------------------------------------
AUDIENCE = "https://register.example"
ISSUER_CERTS = "https://www.googleapis.com/oauth2/v1/certs"


def _signing_pair():
    """An RSA key and a self-signed certificate, as Google's cert endpoint publishes them."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-signer")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return pem_key, cert.public_bytes(serialization.Encoding.PEM).decode()


class CertEndpoint:
    """Stands in for Google's certificate endpoint behind google-auth's transport Request."""

    def __init__(self, certs: dict, cache_control: str) -> None:
        self.certs = certs
        self.cache_control = cache_control
        self.fetches = 0

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
        self.fetches += 1

        class Response:
            status = 200
            data = json.dumps(self.certs).encode()

        Response.headers = {"Cache-Control": self.cache_control, "Age": "100"}
        return Response()


def _token(pem_key: str, kid: str) -> str:
    from google.auth import crypt, jwt

    now = int(time.time())
    claims = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "email": "push@example.iam.gserviceaccount.com",
        "email_verified": True,
        "iat": now,
        "exp": now + 600,
    }
    return jwt.encode(crypt.RSASigner.from_string(pem_key, key_id=kid), claims).decode()


class _Request:
    def __init__(self, token: str) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("cache_control", "fetches"),
    [
        ("public, max-age=19870, must-revalidate, no-transform", 1),
        ("no-store", 3),
        ("public, max-age=50", 3),  # Age 100 > max-age: already stale
    ],
)
def test_signing_keys_are_fetched_once_per_their_cache_control(monkeypatch, cache_control, fetches):
    from functions.register import auth
    from obsingest.settings import FunctionSettings

    pem_key, cert = _signing_pair()
    endpoint = CertEndpoint({"k1": cert}, cache_control)
    monkeypatch.setattr(auth, "_request", lambda: cache)
    cache = auth.KeyCache(endpoint)
    settings = FunctionSettings(push_auth=True, push_audience=AUDIENCE)
    for _ in range(3):
        assert auth.verify_push_request(_Request(_token(pem_key, "k1")), settings) is None
    assert endpoint.fetches == fetches
    assert auth.verify_push_request(_Request(_token(_signing_pair()[0], "k1")), settings)[1] == 403


def test_kept_keys_expire_with_their_max_age():
    from functions.register.auth import KeyCache, fresh_for

    clock = [0.0]
    endpoint = CertEndpoint({}, "max-age=300")
    cache = KeyCache(endpoint, clock=lambda: clock[0])
    cache(ISSUER_CERTS)
    clock[0] = 199.0  # max-age 300 - Age 100 = 200 s fresh
    cache(ISSUER_CERTS)
    assert endpoint.fetches == 1
    clock[0] = 201.0
    cache(ISSUER_CERTS)
    assert endpoint.fetches == 2
    cache(ISSUER_CERTS, method="POST", body=b"x")  # never kept
    cache(ISSUER_CERTS, method="POST", body=b"x")
    assert endpoint.fetches == 4
    assert fresh_for({"cache-control": "max-age=abc"}) == 0
    assert fresh_for({"Cache-Control": "private, max-age=60"}) == 60
    assert fresh_for({}) == 0
