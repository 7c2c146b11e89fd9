"""Listing a bucket for reconciliation (``ObjectStore`` has none): GCS's ``list_blobs`` or a walk
of a local store, both from a name (``start_offset``), as the incremental reconcile needs; and
``list_nights``, which lists only the nights (``.../{day_obs}/`` prefixes) a sweep asks for;
``lanes``, a prefix's instrument prefixes, each listed from its own watermark.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from obsingest import defaults
from obsingest.camera import INSTRUMENTS
from obsingest.errors import ObsIngestError, RetriableError
from obsingest.store.base import ObjectStore, StoredObject


class ListingFailed(RetriableError, reason="listing-failed"):
    """The bucket could not be listed (store down, network): the next pass tries again."""


#: each page's (connect, read) timeout and the retries' total, in seconds: a pass also holds the
#: canary, the outbox drain and the redrive, so an unlistable store fails it in seconds (the next
#: pass tries again) rather than after the library's 120 s of retries, once per listing
PAGE_TIMEOUT = (5.0, 30.0)
RETRY_SECONDS = 15.0


def _gcs_pages(store: Any, **query: Any) -> Any:
    from google.cloud.storage.retry import DEFAULT_RETRY

    retry = DEFAULT_RETRY.with_timeout(RETRY_SECONDS)
    return store.client.list_blobs(store.bucket, timeout=PAGE_TIMEOUT, retry=retry, **query)


def _list_gcs(store: Any, prefix: str, start_offset: str) -> Iterator[StoredObject]:
    from obsingest.store.gcs import stored_object  # google.api_core: GCS listings only

    blobs = _gcs_pages(store, prefix=prefix or None, start_offset=start_offset or None)
    return (stored_object(blob, store.bucket) for blob in blobs)


def below(directory: str, start_offset: str) -> bool:
    """Whether every name under ``directory`` (``a/b/``) sorts below ``start_offset``."""
    return directory < start_offset and not start_offset.startswith(directory)


def _list_local(store: Any, prefix: str, start_offset: str) -> Iterator[StoredObject]:
    root: Path = store.root
    start = root / prefix if not prefix or prefix.endswith("/") else (root / prefix).parent
    if not start.is_dir():
        return
    for directory, dirs, files in os.walk(start):
        relative = Path(directory).relative_to(root).as_posix()
        base = "" if relative == "." else f"{relative}/"
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not below(f"{base}{d}/", start_offset))
        for filename in sorted(files):
            name = f"{base}{filename}"
            if not name.startswith(prefix) or name < start_offset:
                continue
            try:
                yield store.stat(name)
            except ObsIngestError:  # written half-way (no sidecar yet) or just deleted
                continue


def _children_gcs(store: Any, prefix: str) -> tuple[list[StoredObject], list[str]]:
    from obsingest.store.gcs import stored_object

    blobs = _gcs_pages(store, prefix=prefix or None, delimiter="/")
    objects = [stored_object(blob, store.bucket) for blob in blobs]  # every page: then .prefixes
    return objects, sorted(blobs.prefixes)


def _children_local(store: Any, prefix: str) -> tuple[list[StoredObject], list[str]]:
    directory: Path = store.root / prefix
    if not directory.is_dir():
        return [], []
    objects: list[StoredObject] = []
    prefixes: list[str] = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            prefixes.append(f"{prefix}{entry.name}/")
            continue
        try:
            objects.append(store.stat(f"{prefix}{entry.name}"))
        except ObsIngestError:  # written half-way (no sidecar yet) or just deleted
            continue
    return objects, prefixes


def _listing(store: ObjectStore, local: Callable[..., Any], gcs: Callable[..., Any]) -> Any:
    from obsingest.store.gcs import GcsStore
    from obsingest.store.local import LocalDirStore

    if isinstance(store, GcsStore):
        return gcs
    if isinstance(store, LocalDirStore):
        return local
    raise TypeError(f"cannot list a {type(store).__name__}: reconcile lists GCS or local dirs")


@contextmanager
def _listing_failed(store: ObjectStore, prefix: str) -> Iterator[None]:
    """Any error but the project's own, listing ``prefix``, as ListingFailed (try again later)."""
    try:
        yield
    except ObsIngestError:
        raise
    except Exception as exc:  # google-api-core, requests, OSError
        raise ListingFailed(f"listing {store.uri(prefix)!r}: {type(exc).__name__}: {exc}") from exc


def iter_objects(store: ObjectStore, prefix: str, start_offset: str = "") -> Iterator[StoredObject]:
    """Objects under ``prefix`` named ``start_offset`` or later, one page at a time;
    ListingFailed if unlistable."""
    lister = _listing(store, _list_local, _list_gcs)
    with _listing_failed(store, prefix):
        yield from lister(store, prefix, start_offset)


def list_objects(store: ObjectStore, prefix: str, start_offset: str = "") -> list[StoredObject]:
    """Objects under ``prefix`` named ``start_offset`` or later; ListingFailed if unlistable."""
    return list(iter_objects(store, prefix, start_offset))


def children(store: ObjectStore, prefix: str) -> tuple[list[StoredObject], list[str]]:
    """One level of ``prefix`` (a ``/`` delimiter listing): its objects and its sub-prefixes."""
    lister = _listing(store, _children_local, _children_gcs)
    with _listing_failed(store, prefix):
        result: tuple[list[StoredObject], list[str]] = lister(store, prefix)
    return result


_NIGHT = re.compile(r"(19|2[0-2])\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])")


def night_of(prefix: str) -> int | None:
    """The day_obs a prefix's last part names (``raw/LSSTCam/20261122/``), else None."""
    part = prefix.rstrip("/").rpartition("/")[2]
    return int(part) if _NIGHT.fullmatch(part) else None


def nights_in(name: str) -> list[int]:
    """The day_obs that a name's (or prefix's) parts name, in order (one in the layout)."""
    return [night for part in name.split("/") if (night := night_of(part)) is not None]


def list_nights(
    store: ObjectStore, prefix: str, wanted: Callable[[int], bool], depth: int = 3
) -> Iterator[StoredObject]:
    """The objects under ``prefix`` but those of the nights not ``wanted``: the levels above the
    night (``{instrument}/``, ``raw/{instrument}/`` in quarantine) are walked one delimiter
    listing at a time, down to ``depth`` levels; a night is listed whole if wanted, skipped if
    not; anything else (a prefix at or below a night, a name outside the layout) is listed whole."""
    if depth <= 0 or nights_in(prefix):
        yield from iter_objects(store, prefix)
        return
    objects, prefixes = children(store, prefix)
    yield from objects
    for sub in prefixes:
        night = night_of(sub)
        if night is None:
            yield from list_nights(store, sub, wanted, depth - 1)
        elif wanted(night):
            yield from iter_objects(store, sub)


def splits(prefix: str) -> bool:
    """Whether ``prefix`` is above the instruments (``raw/``, ``quarantine/``): it names no
    instrument and no night, and ends a level."""
    ends_a_level = not prefix or prefix.endswith("/")
    return ends_a_level and not any(part in INSTRUMENTS or night_of(part) for part in prefix.split("/"))


def lane_of(prefix: str, name: str, raw: str = defaults.RAW_PREFIX) -> str | None:
    """The lane (see ``lanes``) of ``name``, an object under ``prefix``; None for an object lying
    directly at one of its levels (outside the layout)."""
    if not splits(prefix):
        return prefix
    rest = name[len(prefix) :]
    if rest.startswith(raw):
        prefix, rest = prefix + raw, rest[len(raw) :]
    head, slash, _ = rest.partition("/")
    return f"{prefix}{head}/" if slash else None


def lanes(
    store: ObjectStore, prefix: str, raw: str = defaults.RAW_PREFIX
) -> tuple[list[StoredObject], list[str]]:
    """What the incremental reconcile lists ``prefix`` as: one lane per instrument prefix
    (``raw/{instrument}/``; ``quarantine/raw/{instrument}/`` under the quarantine prefix, whose
    names are the raw ones), each from its own watermark, as names sort by instrument first; and
    the objects lying directly at those levels. Any other sub-prefix is a lane of its own; a prefix
    at or below an instrument or a night is one lane. One delimiter listing per level (two under
    the quarantine prefix)."""
    if not splits(prefix):
        return [], [prefix]
    objects, subs = children(store, prefix)
    found: list[str] = []
    for sub in subs:
        if sub == prefix + raw:
            more, deeper = children(store, sub)
            objects, found = objects + more, found + deeper
        else:
            found.append(sub)
    return objects, found
