"""Google Cloud Storage behind ``ObjectStore``: create-once writes, verified bytes, bounded retries.

- ``put`` sends the CRC32C with ``ifGenerationMatch=0``: a 412 means "already there", resolved by
  checksum (same bytes: success; different: ObjectConflict).
- Retries (``obsingest.retry``, within the 5 s budget) only for what can heal: 429, 408, 5xx,
  resets, timeouts, and at most ``auth_retries`` 403s (production saw transient ones on HEAD).
  A resource run out (some answered 403) is an outage, never capped as an auth 403.
- Requests are the JSON API's, sent through google-auth's urllib3 transport; the library's client
  is kept for listings and provisioning. Proxies, ``.netrc`` and the CA bundle are read once per
  store (``HttpEnvironment``) for both.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import requests
import requests.auth
from google.api_core import exceptions as api_exceptions
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults
from obsingest.checksums import crc32c_b64
from obsingest.errors import ObjectMissing, PermanentError, RetriableError
from obsingest.exhaustion import as_exhausted, exhaustion_of, http_status
from obsingest.logs import get_logger, log_event
from obsingest.retry import Attempt, RetriesExhausted, RetryPolicy, Transient, call_with_retries
from obsingest.store.base import Head, ObjectConflict, PutResult, StoredObject
from obsingest.store.notifications import stored_from_resource

log = get_logger("obsingest.store.gcs")

T = TypeVar("T")

CONTENT_TYPE = "application/fits"


class GcsSettings(BaseSettings):
    """GCS client behaviour (``OBSINGEST_GCS_*``)."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_GCS_", extra="ignore")

    #: Project for the client; with an emulator any name works.
    project: str = defaults.LOCAL_PROJECT
    #: Total time one store call may take, retries included: the per-CCD budget.
    deadline_seconds: float = Field(default=defaults.BUDGET_SECONDS, gt=0)
    #: Upper bound of a single HTTP request (also bounded by what is left of the deadline).
    request_timeout: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=6, ge=1)
    base_delay: float = Field(default=0.05, ge=0)
    max_delay: float = Field(default=1.0, ge=0)
    #: Extra tries for a 403: a transient auth failure heals fast or is not transient.
    auth_retries: int = Field(default=2, ge=0)
    #: HTTP connections kept per host (parallel uploads/reads from one process).
    pool_connections: int = Field(default=32, ge=1)


class StoreRequestRefused(PermanentError, reason="store-request-refused"):
    """The store refused the request itself (400, 401, 404 bucket, ...): retrying cannot help."""


class BucketMissing(StoreRequestRefused, reason="bucket-missing"): ...


class StorePermissionDenied(StoreRequestRefused, reason="store-permission-denied"): ...


class ObjectVanished(RetriableError, reason="object-vanished"):
    """The store said "already there" (412) and then "not there" (404): someone deleted it in
    between. A retry uploads it again."""


class StoreUnavailable(RetriableError, reason="store-unavailable"):
    """Reading failed for a reason that is not the object's fault (credentials, permissions,
    a wrong or missing bucket): the event must be redelivered, never quarantined."""


_RETRIABLE_STATUS = {408, 429, 500, 502, 503, 504}


#: words of a 400 that says the bytes received are not the bytes whose checksum was sent
_HASH_WORDS = ("hash", "crc32c", "md5")


def classify_gcs_error(exc: BaseException, auth_retries: int = 2) -> Transient | None:
    """Transient (with its kind) for errors a retry can fix; None for permanent ones (a 412
    too: create-once's "already there", handled by ``put``)."""
    from google.auth.exceptions import TransportError

    if isinstance(exc, api_exceptions.GoogleAPICallError):
        status = http_status(exc)
        if status in _RETRIABLE_STATUS:
            return Transient(f"http-{status}")
        if status in (403, 507) and exhaustion_of(exc) is not None:
            # quotaExceeded / rateLimitExceeded / 507: an outage, not a permission
            return Transient(f"http-{status}-exhausted")
        if status == 403:
            return Transient("http-403", max_retries=auth_retries)
        text = str(exc).lower()
        if status == 400 and "match" in text and any(w in text for w in _HASH_WORDS):
            # "Provided CRC32C ... doesn't match calculated ...": bytes damaged in transit
            return Transient("checksum-mismatch", max_retries=1)
        return None
    if isinstance(exc, TimeoutError):
        return Transient("timeout")
    if isinstance(exc, (ConnectionError, TransportError)):
        return Transient("connection")
    if isinstance(exc, DataCorruption):  # checksum mismatch in transit: send again
        return Transient("data-corruption")
    return None


@dataclass(frozen=True)
class HttpEnvironment:
    """What ``requests`` takes from the environment for one endpoint, read once: its default
    ``trust_env`` re-reads it on every request, a large share of a small upload's CPU."""

    endpoint: str
    #: scheme -> proxy URL (empty when none applies or ``NO_PROXY`` exempts the endpoint)
    proxies: dict[str, str] = field(default_factory=dict)
    #: (user, password) from ``.netrc`` (or ``NETRC``) for the endpoint's host
    netrc_auth: tuple[str, str] | None = None
    #: ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, else True (requests' own bundle)
    verify: str | bool = True

    @classmethod
    def resolve(cls, endpoint: str) -> HttpEnvironment:
        from requests.utils import get_environ_proxies, get_netrc_auth

        auth = get_netrc_auth(endpoint)
        return cls(
            endpoint=endpoint,
            proxies=dict(get_environ_proxies(endpoint)),
            netrc_auth=(str(auth[0]), str(auth[1])) if auth else None,
            verify=(os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True),
        )

    def apply(self, session: requests.Session) -> requests.Session:
        """``session`` with these settings and without per-request environment reads."""
        session.trust_env = False
        session.proxies.update(self.proxies)
        session.verify = self.verify
        if self.netrc_auth is not None:
            session.auth = _HostAuth(urlsplit(self.endpoint).hostname or "", self.netrc_auth)
        return session


class _HostAuth(requests.auth.AuthBase):
    """A ``.netrc`` entry's Basic credentials, sent to their host only, as a requests auth and
    around a urllib3 pool (``http``) as its ``urlopen``."""

    def __init__(self, host: str, credentials: tuple[str, str], http: Any = None) -> None:
        import urllib3

        self.host = host
        self.http = http
        self.header = urllib3.make_headers(basic_auth=":".join(credentials))["authorization"]

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if urlsplit(request.url or "").hostname == self.host:
            request.headers["Authorization"] = self.header
        return request

    def urlopen(self, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any) -> Any:
        if urlsplit(url).hostname == self.host:
            headers = {**(headers or {}), "authorization": self.header}
        return self.http.urlopen(method, url, body=body, headers=headers, **kwargs)


def make_client(settings: GcsSettings, environment: HttpEnvironment | None = None) -> Any:
    """A storage client with a pooled session."""
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import storage
    from requests.adapters import HTTPAdapter

    endpoint = environment.endpoint if environment else endpoint_from_env()
    credentials, project = _credentials(endpoint)
    options = None if endpoint == PUBLIC_ENDPOINT else {"api_endpoint": endpoint}
    session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]  # google.auth
    client = storage.Client(
        project=project or settings.project, credentials=credentials, client_options=options, _http=session
    )
    adapter = HTTPAdapter(pool_connections=settings.pool_connections, pool_maxsize=settings.pool_connections)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    (environment or HttpEnvironment.resolve(endpoint)).apply(session)
    return client


def stored_object(blob: Any, bucket: str) -> StoredObject:
    """A listed ``Blob`` as a ``StoredObject`` (its public attributes; listings carry every field)."""
    created = blob.time_created or datetime.now(UTC)
    return StoredObject(
        bucket=bucket,
        name=blob.name,
        size=int(blob.size or 0),
        crc32c=blob.crc32c or "",
        md5_hash=blob.md5_hash or "",
        generation=int(blob.generation or 0),
        time_created=created if created.tzinfo else created.replace(tzinfo=UTC),
        metadata={str(k): str(v) for k, v in (blob.metadata or {}).items()},
        uri=f"gs://{bucket}/{blob.name}",
    )


PUBLIC_ENDPOINT = "https://storage.googleapis.com"


def endpoint_from_env() -> str:
    """``STORAGE_EMULATOR_HOST`` (fake-gcs-server) when set, else the public GCS endpoint."""
    host = os.environ.get("STORAGE_EMULATOR_HOST", "").strip().rstrip("/")
    if not host:
        return PUBLIC_ENDPOINT
    return host if "://" in host else f"http://{host}"


def multipart_body(resource: dict[str, Any], data: bytes) -> tuple[bytes, str]:
    """The ``multipart/related`` body of an upload (the object resource as JSON, then the bytes)
    and its content type. The boundary is random per request, as the library makes it: a fixed
    one could occur in a file (a backfill of this very source tree)."""
    boundary = "===============" + secrets.token_hex(16) + "=="
    head = f"--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n"
    mid = f"\r\n--{boundary}\r\ncontent-type: {CONTENT_TYPE}\r\n\r\n"
    parts = (head.encode(), json.dumps(resource).encode(), mid.encode(), data)
    return b"".join((*parts, f"\r\n--{boundary}--".encode())), (f'multipart/related; boundary="{boundary}"')


def pool_manager(environment: HttpEnvironment, maxsize: int) -> Any:
    """A urllib3 pool manager reaching the endpoint as requests would (proxy, CA bundle); no
    retries of its own: callers retry by their own rules."""
    import urllib3
    from requests.certs import where  # the CA bundle requests (the library's transport) uses
    from requests.utils import get_auth_from_url, prepend_scheme_if_needed, select_proxy

    ca_certs = environment.verify if isinstance(environment.verify, str) else where()
    proxy = select_proxy(environment.endpoint, environment.proxies)  # its scheme's, else ALL_PROXY
    if proxy:
        proxy = prepend_scheme_if_needed(proxy, "http")
        user, password = get_auth_from_url(proxy)
        headers = urllib3.make_headers(proxy_basic_auth=f"{user}:{password}") if user else None
        return urllib3.ProxyManager(
            proxy, proxy_headers=headers, maxsize=maxsize, retries=False, ca_certs=ca_certs
        )
    return urllib3.PoolManager(maxsize=maxsize, retries=False, ca_certs=ca_certs)


def _credentials(endpoint: str, *scopes: str) -> tuple[Any, str | None]:
    """Anonymous against an emulator, else the default credentials (and their project)."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    if endpoint != PUBLIC_ENDPOINT:
        return AnonymousCredentials(), None  # type: ignore[no-untyped-call]  # google.auth
    return google.auth.default(scopes=list(scopes) or None)


def authorized_http(settings: GcsSettings, endpoint: str, environment: HttpEnvironment | None = None) -> Any:
    """google-auth's urllib3 transport (``_credentials``); a ``.netrc`` entry for the endpoint's
    host replaces the token."""
    from google.auth.transport.urllib3 import AuthorizedHttp

    env = environment or HttpEnvironment.resolve(endpoint)
    pool = pool_manager(env, settings.pool_connections)
    if env.netrc_auth is not None:
        return _HostAuth(urlsplit(endpoint).hostname or "", env.netrc_auth, pool)
    credentials, _ = _credentials(endpoint, "https://www.googleapis.com/auth/devstorage.read_write")
    return AuthorizedHttp(credentials, http=pool)  # type: ignore[no-untyped-call]  # google.auth


def _anonymous_pool(http: Any, endpoint: str) -> Any:
    """``endpoint``'s pool inside an anonymous google-auth wrapper of a plain pool manager."""
    import urllib3
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.urllib3 import AuthorizedHttp

    anonymous = isinstance(http, AuthorizedHttp) and isinstance(http.credentials, AnonymousCredentials)
    if not anonymous or type(http.http) is not urllib3.PoolManager:  # a ProxyManager, or a caller's own
        return None
    return http.http.connection_from_url(endpoint)


class DataCorruption(Exception):
    """Bytes received whose CRC32C differs from the answer's ``x-goog-hash``."""


def _crc32c(headers: Any) -> str:
    """The CRC32C of ``x-goog-hash`` (``crc32c=...,md5=...``), '' if absent."""
    found = re.search(r"(?:^|,)\s*crc32c=([^,\s]+)", str(headers.get("x-goog-hash", "")))
    return found[1] if found else ""


class GcsStore:
    """A GCS bucket as an ``ObjectStore``, one JSON-API request per call (less CPU per object than
    the library's client: benchmarks/README.md). Thread-safe; share one per process."""

    def __init__(
        self,
        bucket: str,
        settings: GcsSettings | None = None,
        endpoint: str | None = None,
        http: Any = None,
        client: Any = None,
    ) -> None:
        self.settings = s = settings or GcsSettings()
        self.bucket = bucket
        self.policy = RetryPolicy(s.max_attempts, s.base_delay, s.max_delay, deadline=s.deadline_seconds)
        if client is not None:
            self.client = client
        self.endpoint = endpoint or endpoint_from_env()
        self.environment = HttpEnvironment.resolve(self.endpoint)
        self.http = http or authorized_http(self.settings, self.endpoint, self.environment)
        #: the endpoint's own pool where google-auth's wrapper adds nothing but CPU per request
        #: (an emulator: anonymous, no proxy), else None
        self._pool = _anonymous_pool(self.http, self.endpoint)
        b = quote(bucket, safe="")
        self._upload_url = (
            f"{self.endpoint}/upload/storage/v1/b/{b}/o?uploadType=multipart&ifGenerationMatch=0"
        )
        self._object_url = f"{self.endpoint}/storage/v1/b/{b}/o/"
        self._media_url = f"{self.endpoint}/download/storage/v1/b/{b}/o/"

    @cached_property
    def client(self) -> Any:
        """The library's client, made on first use (puts and reads never need it)."""
        return make_client(self.settings, self.environment)

    def uri(self, name: str) -> str:
        return f"gs://{self.bucket}/{name}"

    def _retrying(self, what: str, name: str, fn: Callable[[float], T]) -> T:
        def on_retry(attempt: Attempt) -> None:
            fields = {"op": what, "object": name, "attempt": attempt.number, "kind": attempt.kind}
            delay_s, error = round(attempt.delay, 4), str(attempt.error)[:300]
            log_event(log, "gcs.retry", logging.WARNING, **fields, delay_s=delay_s, error=error)

        auth_retries = self.settings.auth_retries
        try:
            return call_with_retries(
                fn,
                lambda exc: classify_gcs_error(exc, auth_retries),
                self.policy,
                what=f"gcs {what} gs://{self.bucket}/{name}",
                on_retry=on_retry,
            )
        except RetriesExhausted as exc:  # rate-limited, quota-exceeded: say what ran out
            resource = "destination" if what == "put" else "store"
            exhausted = as_exhausted(exc, resource, f"gs://{self.bucket}")
            if exhausted is None:
                raise
            raise exhausted from exc

    def _read(self, what: str, name: str, fetch: Callable[[float], T]) -> T:
        """Facility-side reads: only a missing *object* is the input's fault."""
        try:
            return self._retrying(what, name, fetch)
        except api_exceptions.GoogleAPICallError as exc:
            where = f"{what} {self.uri(name)!r}"
            if http_status(exc) == 404 and "bucket" not in str(exc).lower():
                raise ObjectMissing(f"{where}: object does not exist in gs://{self.bucket}") from exc
            raise StoreUnavailable(f"{where}: {exc}") from exc

    def _send(
        self,
        method: str,
        url: str,
        remaining: float,
        body: bytes | None,
        headers: dict[str, str] | None,
        ok: tuple[int, ...] = (200,),
    ) -> Any:
        """One HTTP request; the urllib3 response of an ``ok`` status, else the library's
        exception for the status."""
        import urllib3
        from google.auth.exceptions import TransportError

        timeout = urllib3.Timeout(total=max(0.05, min(self.settings.request_timeout, remaining)))
        # the endpoint's own pool takes the path
        http, target = (self.http, url) if self._pool is None else (self._pool, url[len(self.endpoint) :])
        try:
            response = http.urlopen(
                method, target, body=body, headers=headers, timeout=timeout, retries=False, redirect=False
            )
        except urllib3.exceptions.TimeoutError as exc:
            raise TimeoutError(f"{method} {url}: {exc}") from exc
        except urllib3.exceptions.HTTPError as exc:  # connection refused/reset, protocol
            raise TransportError(f"{method} {url}: {exc}") from exc  # type: ignore[no-untyped-call]
        if response.status in ok:
            return response
        text = response.data[:500].decode("utf-8", "replace")
        raise api_exceptions.from_http_status(  # type: ignore[no-untyped-call]  # google.api_core
            response.status, f"{method} {url}: {text}"
        )

    def _put_once(
        self, name: str, data: bytes, crc: str, metadata: dict[str, str], remaining: float
    ) -> StoredObject:
        # CRC32C alone guards the transfer (a client MD5 costs the edge CPU for no more); the
        # answer is the stored resource: verified without a second request
        resource = {"name": name, "contentType": CONTENT_TYPE, "crc32c": crc, "metadata": metadata}
        body, content_type = multipart_body(resource, data)
        response = self._send("POST", self._upload_url, remaining, body, {"content-type": content_type})
        return stored_from_resource(json.loads(response.data), self.bucket)

    def put(self, name: str, data: bytes, metadata: dict[str, str] | None = None) -> PutResult:
        crc = crc32c_b64(data)
        meta = dict(metadata or {})
        try:
            obj = self._retrying(
                "put", name, lambda remaining: self._put_once(name, data, crc, meta, remaining)
            )
        except api_exceptions.PreconditionFailed:
            try:
                existing = self.stat(name)
            except ObjectMissing as exc:
                raise ObjectVanished(f"{self.uri(name)}: 412 on create, then gone: {exc}") from exc
            if existing.size == len(data) and existing.crc32c == crc:
                log_event(log, "gcs.put.exists", object=name, size=len(data))
                return PutResult(existing, created=False)
            raise ObjectConflict(
                f"object {self.uri(name)!r} already exists with different bytes "
                f"(stored crc32c {existing.crc32c}, {existing.size} B; new {crc}, {len(data)} B)",
                existing,
                crc,
            ) from None
        except api_exceptions.GoogleAPICallError as exc:  # not retriable: refused
            what, status = f"put {name!r}", http_status(exc)
            if status == 404:
                raise BucketMissing(f"{what}: bucket {self.bucket!r} not found ({exc})") from exc
            if status in (401, 403):
                raise StorePermissionDenied(f"{what}: permission denied ({exc})") from exc
            raise StoreRequestRefused(f"{what}: refused with HTTP {status} ({exc})") from exc
        return PutResult(obj, created=True)

    def stat(self, name: str) -> StoredObject:
        """Object metadata: a GET of the resource (GCS's HEAD)."""
        url = self._object_url + quote(name, safe="")
        response = self._read("stat", name, lambda remaining: self._send("GET", url, remaining, None, None))
        return stored_from_resource(json.loads(response.data), self.bucket)

    def _media(self, name: str, remaining: float, headers: dict[str, str] | None) -> Any:
        url = self._media_url + quote(name, safe="") + "?alt=media"
        return self._send("GET", url, remaining, None, headers, ok=(200, 206))

    def read_head(self, name: str, length: int) -> Head:
        """One ranged media GET; the generation and whole-object CRC32C from its headers."""

        def download(remaining: float) -> Head:
            headers = {"range": f"bytes=0-{max(0, length - 1)}"}
            response = self._media(name, remaining, headers)
            generation = int(response.headers.get("x-goog-generation") or 0)
            return Head(response.data, generation, _crc32c(response.headers))

        return self._read("read", name, download)

    def read(self, name: str) -> bytes:
        """Whole object, checked against the answer's CRC32C (unless gzip-stored: that hash is of
        other bytes); ObjectMissing when absent."""

        def download(remaining: float) -> bytes:
            response = self._media(name, remaining, None)
            data: bytes = response.data
            stored = _crc32c(response.headers)
            encoding = str(response.headers.get("x-goog-stored-content-encoding", "identity"))
            if stored and encoding == "identity" and crc32c_b64(data) != stored:
                raise DataCorruption(
                    f"read {self.uri(name)!r}: received bytes' crc32c {crc32c_b64(data)} != stored {stored}"
                )
            return data

        return self._read("read", name, download)

    def delete(self, name: str) -> None:
        """Remove an object, if there (the pipeline deletes only its own canaries)."""
        url = self._object_url + quote(name, safe="")
        try:
            self._retrying(
                "delete",
                name,
                lambda remaining: self._send("DELETE", url, remaining, None, None, ok=(200, 204)),
            )
        except api_exceptions.NotFound as exc:  # GCS: "No such object: ..." is done
            if "bucket does not exist" in str(exc).lower():
                raise

    def close(self) -> None:
        pool = getattr(self.http, "http", None)
        if pool is not None:
            pool.clear()
