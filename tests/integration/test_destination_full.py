"""The destination's filesystem really full under a running edge (``--to file://DIR`` on a small
tmpfs): every CCD is registered exactly once after space returns, no ``.part`` file is left, no
CCD is quarantined (issue 21).

Before, ``LocalDirStore.put`` let ``OSError: [Errno 28]`` escape and left its temp file; the
edge took it for an unexpected error, retried twice at once and quarantined the CCD, moving its
raw file to ``HANDOFF/quarantine/`` where nothing ever resent it.

The size of the night and how long the disk stays full come from the environment, so the
issue's own figures, which ``make chaos`` runs:
``OBSINGEST_DEST_FULL_CCDS=300 OBSINGEST_DEST_FULL_SECONDS=60``
(``make test`` runs 60 CCDs with 10 s full, well under a minute).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.daq.simulator import CcdSpec, write_raw_ccd
from producers.edge.journal import Journal
from tests.integration.fixtures import disk
from tests.integration.fixtures.edge import EdgeProcess, wait_for

pytestmark = pytest.mark.integration

CCDS = int(os.environ.get("OBSINGEST_DEST_FULL_CCDS", "60"))
FULL_SECONDS = float(os.environ.get("OBSINGEST_DEST_FULL_SECONDS", "10"))
DETECTORS = 10
DAY_OBS = 20261122
#: the tmpfs: every small CCD (~150 kB compressed) fits once the ballast is gone
TMPFS_MB = 16 + CCDS // 4
#: room left beside the ballast: a few CCDs get in, then the disk is full
ROOM = 600 * 1024


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with disk.tmpfs(tmp_path / "destination", TMPFS_MB) as mount:
        yield mount


def write_night(handoff: Path) -> list[str]:
    """``CCDS`` small raw CCDs, renamed into place as a DAQ hands them over; their keys."""
    keys = []
    start = datetime(2026, 11, 22, 3, tzinfo=UTC)
    for i in range(CCDS):
        exposure = DAY_OBS * 100000 + 1 + i // DETECTORS
        detector = i % DETECTORS
        spec = CcdSpec("LSSTCam", exposure, detector, DAY_OBS, start, 30.0, "r", size="small")
        write_raw_ccd(spec, handoff / f"LSSTCam_{exposure}_{detector:03d}.fits")
        keys.append(f"LSSTCam/{exposure}/{detector}")
    return keys


def journal_counts(spool: Path) -> dict[str, int]:
    journal = Journal(spool)
    try:
        return journal.counts()
    finally:
        journal.close()


def register_everything(store_root: Path, registry_path: Path) -> tuple[int, int]:
    """Deliver the store's finalize notifications to the register function, as the embedded
    deployment does; (delivered, dead-lettered)."""
    from cloudevents.http import from_dict

    from functions.register import main as register_function
    from functions.register import wiring
    from obsingest.bus.memory import InMemoryBus
    from obsingest.registry import open_registry
    from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
    from obsingest.store.dispatch import OutboxDispatcher
    from obsingest.store.local import LocalDirStore

    store = LocalDirStore(store_root)  # opening it promotes notifications left staged
    registry = open_registry(RegistrySettings(url=f"sqlite:///{registry_path}"))
    settings = StoreSettings(url=f"file://{store_root}")
    wiring.configure(wiring.build_service(store, registry, InMemoryBus(), settings, BusSettings()))
    try:
        dispatcher = OutboxDispatcher(
            store.outbox(), lambda event: register_function.on_object_finalized(from_dict(event))
        )
        while dispatcher.drain_once():
            pass
        return dispatcher.delivered, dispatcher.dead_lettered
    finally:
        wiring.configure(None)
        registry.close()


def test_a_full_destination_is_an_outage_every_ccd_registered_once(tmpfs: Path, tmp_path: Path) -> None:
    handoff, spool = tmp_path / "handoff", tmp_path / "spool"
    handoff.mkdir()
    store_root = tmpfs / "store"
    keys = write_night(handoff)
    ballast = disk.fill(tmpfs, ROOM)
    edge = EdgeProcess(
        handoff,
        spool,
        f"file://{store_root}",
        tmp_path / "logs",
        None,
        "--workers",
        "2",
        "--retry-max-delay",
        "2",
        "--min-free-mb",
        "1",
    )
    try:
        edge.start()
        wait_for(
            lambda: any("destination-full" in r for r in (edge.health() or {}).get("reasons", [])),
            60,
            "the edge to report the destination full",
        )
        health = edge.health() or {}
        assert health["status"] == "degraded"
        assert health["destination"]["exhausted"] == "destination-full"
        full_until = time.monotonic() + FULL_SECONDS
        stored_while_full = journal_counts(spool)["acked"]
        assert stored_while_full < CCDS, "the destination never filled up"
        while time.monotonic() < full_until:  # the whole time: kept, never quarantined
            assert journal_counts(spool)["quarantined"] == 0
            time.sleep(1.0)
        assert not (handoff / "quarantine").exists()
        ballast.unlink()  # space returns
        wait_for(
            lambda: journal_counts(spool)["acked"] == CCDS,
            60 + CCDS / 2,
            f"all {CCDS} CCDs acknowledged after space returned",
        )
        wait_for(lambda: (edge.health() or {}).get("status") == "ready", 30, "health ready")
    finally:
        edge.close()

    counts = journal_counts(spool)
    assert counts["quarantined"] == 0 and counts["acked"] == CCDS
    assert not (handoff / "quarantine").exists()
    assert not edge.events("edge.quarantined")
    retried = {e["reason"] for e in edge.events("edge.retry")}
    assert retried == {"destination-full"}, retried
    assert not list(store_root.rglob("*.part")), "a temp file was left behind"
    assert not list((store_root / ".notifications").glob("*.pending"))

    registry_path = tmp_path / "registry.sqlite3"
    delivered, dead = register_everything(store_root, registry_path)
    assert dead == 0
    from obsingest.registry import open_registry
    from obsingest.settings import RegistrySettings

    registry = open_registry(RegistrySettings(url=f"sqlite:///{registry_path}"))
    try:
        datasets = registry.datasets()
        registered = [f"{d['instrument']}/{d['exposure']}/{d['detector']}" for d in datasets]
        assert sorted(registered) == sorted(keys), "every CCD registered exactly once"
        assert registry.quarantined() == []
    finally:
        registry.close()
    assert delivered == CCDS
