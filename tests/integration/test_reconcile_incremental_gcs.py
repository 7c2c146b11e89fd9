"""The incremental reconcile on the GCS emulator and PostgreSQL: the listing starts at the
watermark (``start_offset``), a pass asks the registry only about what is new, and objects
whose notification never came (the test bucket has no notification config) are registered by
the first pass that sees them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.register.facility.listing import list_nights, list_objects
from functions.register.facility.reconcile import Reconciler
from functions.register.wiring import build_service
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId
from obsingest.registry import Registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store.gcs import GcsSettings, GcsStore
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd

pytestmark = pytest.mark.integration

INSTRUMENT = "LSSTComCam"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def upload(store: GcsStore, exposure: int, detectors: range) -> None:
    uploader = DirectUploader(store, producer="test")
    for detector in detectors:
        did = DataId(INSTRUMENT, exposure, detector)
        assert uploader.send(did, small_ccd(exposure, detector), datetime.now(UTC)).status == ("stored")


@pytest.fixture
def service(gcs, postgres):
    store = GcsStore(gcs.new_bucket("reconcile"), settings=GcsSettings(project=gcs.project_id))
    registry = Registry.open(RegistrySettings(url=postgres))
    svc = build_service(
        store, registry, InMemoryBus(), StoreSettings(url=f"gs://{store.bucket}"), BusSettings()
    )
    yield svc
    registry.close()


def test_the_emulator_lists_from_a_name(service) -> None:
    store = service.store
    for exposure in (2026112200001, 2026112200002):
        for detector in (0, 5):
            store.put(DataId(INSTRUMENT, exposure, detector).object_name(), b"x")
    names = [o.name for o in list_objects(store, "raw/")]
    assert len(names) == 4
    assert [o.name for o in list_nights(store, "raw/", lambda night: night == 20261122)] == names
    assert list(list_nights(store, "raw/", lambda night: False)) == []
    second = "raw/LSSTComCam/20261122/CC_O_20261122_000002/"
    for offset in ["", *names, f"{names[1]}0", second, "s"]:
        listed = [o.name for o in list_objects(store, "raw/", start_offset=offset)]
        assert listed == sorted(n for n in names if n >= offset), offset


def test_incremental_passes_on_gcs_register_what_is_new_and_ask_only_about_it(service) -> None:
    clock = Clock()
    reconciler = Reconciler(service, ("raw/",), grace=0.0, lag=60.0, clock=clock)
    since = clock.now - timedelta(hours=1)
    for exposure in (2026112200001, 2026112200002):
        upload(service.store, exposure, range(6))
    clock.now = datetime.now(UTC) + timedelta(seconds=120)  # past the lag
    sweep = reconciler.run(since)
    assert (sweep.listed, sweep.missing, sweep.outcomes) == (12, 12, {"registered": 12})
    asked: list[str] = []
    audit = service.registry.audit
    registered_uris = audit.registered_uris

    def asking(uris: Any) -> Any:
        asked.extend(uris)
        return registered_uris(uris)

    audit.registered_uris = asking
    upload(service.store, 2026112200003, range(6))
    clock.now = datetime.now(UTC) + timedelta(seconds=1)
    report = reconciler.run_new(since)
    # the watermark is exposure 2's last name: listed once more, not asked about
    assert (report.mode, report.listed, report.missing) == ("incremental", 7, 6)
    assert report.outcomes == {"registered": 6} and report.consistent
    assert len(asked) == 6 and all("CC_O_20261122_000003" in uri for uri in asked)
    assert len(service.registry.datasets()) == 18
    asked.clear()
    assert reconciler.run_new(since).missing == 0 and asked == []


@pytest.mark.parametrize("server", ["refusing", "hung"])
def test_an_unreachable_store_fails_a_listing_in_seconds(server, monkeypatch) -> None:
    """A pass also holds the canary, the outbox drain and the redrive: a store that refuses
    connections, or accepts and never answers, fails the listing within the listing's own bounds,
    not after the library's 120 s of retries (89 s refused, over 2 min hung, before)."""
    import socket
    import time

    from functions.register.facility import listing

    monkeypatch.setattr(listing, "PAGE_TIMEOUT", (1.0, 2.0), raising=False)
    monkeypatch.setattr(listing, "RETRY_SECONDS", 3.0, raising=False)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if server == "hung":
        sock.listen(16)  # the kernel accepts; nobody answers
    else:
        sock.close()
    try:
        store = GcsStore("unreachable", endpoint=f"http://127.0.0.1:{port}")
        for lister in (listing.list_objects, listing.children):
            started = time.monotonic()
            with pytest.raises(listing.ListingFailed, match="unreachable/raw/"):
                lister(store, "raw/")
            assert time.monotonic() - started < 20
    finally:
        sock.close()
