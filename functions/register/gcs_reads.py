"""The register function's GCS store: its reads are one JSON-API media request each.

What the function reads of a CCD (``verify``) is one ranged GET of its primary header, whose
response headers carry the object's generation and whole-object CRC32C (``x-goog-generation``,
``x-goog-hash``). Sent through ``GcsHttpStore``'s google-auth urllib3 transport, that is the
request the library sends, without the library's per-request blob and download machinery
(about a quarter of the function's CPU per CCD under a burst), and without importing
``google.cloud.storage`` at all, which a restarted instance otherwise loads before it listens.

Errors are the library's: a non-2xx answer is ``google.api_core``'s exception for its status,
mapped by the store's ``_read_error`` (a missing object is ``ObjectMissing``, anything else
``StoreUnavailable``), and retried by the store's rules (``classify_gcs_error``). A whole read
checks the bytes received against the stored CRC32C, as the library does (``DataCorruption``,
retried: damaged in transit); ``verify`` then compares them with the notification's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from google.api_core import exceptions as api_exceptions

from obsingest.checksums import crc32c_b64
from obsingest.store.base import Head
from obsingest.store.gcs import GcsHttpStore, GcsSettings, _read_error


class DataCorruption(Exception):  # the library's name: retried by that name
    """The bytes received are not the bytes the store holds (their CRC32C differs from the
    ``x-goog-hash`` it answered with): damaged in transit, so ``classify_gcs_error`` retries it
    as it does the library's exception of this name."""


def _goog_hash(headers: Any, kind: str) -> str:
    """One hash of ``x-goog-hash`` (``crc32c=...,md5=...``), '' if absent."""
    for part in str(headers.get("x-goog-hash", "")).split(","):
        key, _, value = part.strip().partition("=")
        if key == kind:
            return value
    return ""


class RegisterGcsStore(GcsHttpStore):
    """``GcsHttpStore`` whose ``read_head`` and ``read`` are one media GET each (see module
    doc); put, stat and delete are ``GcsHttpStore``'s."""

    def __init__(self, bucket: str, settings: GcsSettings | None = None, **kwargs: Any) -> None:
        super().__init__(bucket, settings, **kwargs)
        self._media_url = f"{self.endpoint}/download/storage/v1/b/{quote(bucket, safe='')}/o/"

    def _media(self, name: str, remaining: float, headers: dict[str, str]) -> Any:
        """One GET of the object's bytes; the urllib3 response of a 200 or 206."""
        import urllib3
        from google.auth.exceptions import TransportError

        url = self._media_url + quote(name, safe="") + "?alt=media"
        try:
            response = self.http.urlopen(
                "GET",
                url,
                headers=headers or None,
                timeout=urllib3.Timeout(total=self._timeout(remaining)),
                retries=False,
            )
        except urllib3.exceptions.TimeoutError as exc:
            raise TimeoutError(f"GET {url}: {exc}") from exc
        except urllib3.exceptions.HTTPError as exc:  # connection refused/reset, protocol
            raise TransportError(f"GET {url}: {exc}") from exc  # type: ignore[no-untyped-call]
        if response.status in (200, 206):
            return response
        text = response.data[:500].decode("utf-8", "replace")
        raise api_exceptions.from_http_status(  # type: ignore[no-untyped-call]  # google.api_core
            response.status, f"GET {url}: {text}"
        )

    def read_head(self, name: str, length: int) -> Head:
        """One ranged GET; the generation and whole-object CRC32C from its response headers."""

        def download(remaining: float) -> Head:
            headers = {"range": f"bytes=0-{max(0, length - 1)}"}
            response = self._media(name, remaining, headers)
            generation = int(response.headers.get("x-goog-generation") or 0)
            return Head(response.data, generation, _goog_hash(response.headers, "crc32c"))

        try:
            return self._retrying("read", name, download)
        except api_exceptions.GoogleAPICallError as exc:
            raise _read_error(exc, self.bucket, f"read {self.uri(name)!r}") from exc

    def read(self, name: str) -> bytes:
        """Whole object, checked against the CRC32C the store answered with; ObjectMissing
        when absent."""

        def download(remaining: float) -> bytes:
            response = self._media(name, remaining, {})
            data: bytes = response.data
            stored = _goog_hash(response.headers, "crc32c")
            encoding = str(response.headers.get("x-goog-stored-content-encoding", "identity"))
            # a gzip-encoded object is decompressed on the way: its hash is of other bytes
            if stored and encoding == "identity" and crc32c_b64(data) != stored:
                raise DataCorruption(
                    f"read {self.uri(name)!r}: received bytes' crc32c {crc32c_b64(data)} "
                    f"!= stored {stored}"
                )
            return data

        try:
            return self._retrying("read", name, download)
        except api_exceptions.GoogleAPICallError as exc:
            raise _read_error(exc, self.bucket, f"read {self.uri(name)!r}") from exc
