"""Object stores: local directory (embedded default) and GCS, behind ``ObjectStore``."""

from __future__ import annotations

from obsingest.settings import StoreSettings
from obsingest.store.base import Head, ObjectConflict, ObjectStore, PutResult, StoredObject


def open_store(settings: StoreSettings) -> ObjectStore:
    """The store named by ``settings.url``: ``file://DIR`` or ``gs://BUCKET``."""
    url = settings.url
    if url.startswith("file://"):
        from obsingest.store.local import LocalDirStore

        return LocalDirStore(url[len("file://") :])
    if url.startswith("gs://"):
        from obsingest.store.gcs import GcsStore

        return GcsStore(url[len("gs://") :].split("/", 1)[0])
    raise ValueError(f"unsupported store URL {url!r} (use file://DIR or gs://BUCKET)")


__all__ = ["Head", "ObjectConflict", "ObjectStore", "PutResult", "StoredObject", "open_store"]
