"""Listing a bucket for reconciliation (``ObjectStore`` has none): GCS's ``list_blobs`` or a walk
of a local store, both from a name (``start_offset``), as the incremental reconcile needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from obsingest.errors import ObsIngestError, RetriableError
from obsingest.store.base import ObjectStore, StoredObject


class ListingFailed(RetriableError, reason="listing-failed"):
    """The bucket could not be listed (store down, network): the next pass tries again."""


def _list_gcs(store: Any, prefix: str, start_offset: str) -> Iterator[StoredObject]:
    from obsingest.store.gcs import stored_object  # google.api_core: GCS listings only

    blobs = store.client.list_blobs(store.bucket, prefix=prefix or None, start_offset=start_offset or None)
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


def list_objects(store: ObjectStore, prefix: str, start_offset: str = "") -> list[StoredObject]:
    """Objects under ``prefix`` named ``start_offset`` or later; ListingFailed if unlistable."""
    from obsingest.store.gcs import GcsStore
    from obsingest.store.local import LocalDirStore

    if isinstance(store, GcsStore):
        lister = _list_gcs
    elif isinstance(store, LocalDirStore):
        lister = _list_local
    else:
        raise TypeError(f"cannot list a {type(store).__name__}: reconcile lists GCS or local dirs")
    try:
        return list(lister(store, prefix, start_offset))
    except ObsIngestError:
        raise
    except Exception as exc:  # google-api-core, requests, OSError: all "try again later"
        raise ListingFailed(f"listing {store.uri(prefix)!r}: {type(exc).__name__}: {exc}") from exc
