"""One register-function instance SIGKILLed in the middle of a burst, with two instances behind
the relay: every CCD arrives once, no delivery waits for a backoff (the one that hit the dead
instance went to the live one in the same push), and no CCD is more than ~1 s later than the
burst's typical one. Real functions-framework processes, GCS emulator, Pub/Sub emulator,
PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra.local.relay import HttpPushTarget, Relay, RelaySettings
from infra.local.relay.dead_letter import PubSubDeadLetter
from infra.local.relay.spread import SpreadPushTarget
from obsingest.bus.pull import PubSubPullSource, SubscriberThread, subscription_path
from obsingest.dataid import DataId, make_exposure_id
from obsingest.messages import ArrivalEvent, utcnow
from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from obsingest.store.gcs import GcsSettings, GcsStore
from producers.uploader import DirectUploader
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService
from tests.integration.test_direct_path import function_env, provision, small_ccd, wait_for

pytestmark = pytest.mark.integration

INSTRUMENT = "LSSTComCam"
EXPOSURES = [make_exposure_id(20261122, seq) for seq in (501, 502, 503, 504)]
#: pushed first so that both instances are warm (imports, connections) before the burst
WARM_UP = make_exposure_id(20261122, 500)
DETECTORS = range(9)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (/proc children of each of its threads), deepest last."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def crash(pid: int) -> None:
    """SIGKILL a function instance as a crash takes it: the server and every worker it forked
    (an orphaned worker would go on serving the port)."""
    below = descendants(pid)
    os.kill(pid, signal.SIGKILL)
    for child in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@dataclass
class World:
    store: GcsStore
    registry: Registry
    functions: list[FunctionProcess]
    spread: SpreadPushTarget
    relay: Relay
    arrivals: list[ArrivalEvent] = field(default_factory=list)


@pytest.fixture
def world(
    gcs: GcsService, pubsub: PubSubService, postgres_server: PostgresServer, tmp_path: Path
) -> Iterator[World]:
    project = pubsub.project_id
    bus, bucket, relay_sub, arrivals_sub = provision(gcs, pubsub, "failover")
    registry_url = postgres_server.create_database("failover")
    registry = Registry.open(RegistrySettings(url=registry_url))
    env = function_env(project, bus, bucket, registry_url)
    functions = [FunctionProcess(env, tmp_path / f"function-{n}.log").start() for n in range(2)]
    spread = SpreadPushTarget([HttpPushTarget(f.url, timeout=30) for f in functions])
    relay = Relay(
        PubSubPullSource(project, relay_sub),
        spread,
        PubSubDeadLetter(project, bus.objects_dlq_topic),
        RelaySettings(concurrency=8),
        subscription_path=subscription_path(project, relay_sub),
    )
    store = GcsStore(bucket, settings=GcsSettings(project=project))
    world = World(store, registry, functions, spread, relay)
    subscriber = SubscriberThread(
        project, arrivals_sub, lambda d: world.arrivals.append(ArrivalEvent.decode(d.data))
    ).start()
    relay.start()
    try:
        yield world
    finally:
        relay.stop()
        subscriber.stop()
        for function in functions:
            function.stop()
        registry.close()
        postgres_server.drop_database(registry_url)


def test_an_instance_killed_mid_burst_costs_no_ccd_a_retry(world: World, caplog) -> None:
    ccds = {
        DataId(INSTRUMENT, exposure, detector): small_ccd(exposure, detector)
        for exposure in EXPOSURES
        for detector in DETECTORS
    }
    uploader = DirectUploader(world.store, producer="test")

    def ship(item: tuple[DataId, bytes]) -> str:
        data_id, data = item
        return uploader.send(data_id, data, utcnow(), utcnow()).status

    warm = [DataId(INSTRUMENT, WARM_UP, detector) for detector in DETECTORS]
    for data_id in warm:
        assert ship((data_id, small_ccd(data_id.exposure, data_id.detector))) == "stored"
    wait_for(lambda: len(world.registry.datasets()) >= len(warm), 120, "warm-up")
    victim = world.functions[0].proc
    assert victim is not None
    items = list(ccds.items())
    half = len(items) // 2
    with ThreadPoolExecutor(6) as pool:
        shipped = list(pool.map(ship, items[:half]))
        # mid-burst: the first CCDs registered, the others still on their way or not stored yet
        wait_for(lambda: len(world.registry.datasets()) >= len(warm) + 2, 60, "the burst's first")
        crash(victim.pid)
        shipped += pool.map(ship, items[half:])
    assert shipped == ["stored"] * len(ccds)
    everything = len(ccds) + len(warm)
    wait_for(lambda: len({a.dataset_id for a in world.arrivals}) >= everything, 90, "arrivals")
    assert world.relay.wait_idle(quiet=1.0, timeout=60)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    rows = world.registry.datasets()
    assert sorted((r["exposure"], r["detector"]) for r in rows) == sorted(
        (d.exposure, d.detector) for d in [*ccds, *warm]
    )  # every CCD registered, none twice
    assert {a.data_id.key for a in world.arrivals} == {d.key for d in [*ccds, *warm]}
    # the kill was felt (deliveries failed over), yet none waited for a redelivery
    assert world.spread.failovers >= 1
    nacks = [
        (r.__dict__.get("status"), r.__dict__.get("error"))
        for r in caplog.records
        if r.getMessage() == "relay.nacked"
    ]
    assert (world.relay.counts()["nacked"], world.relay.counts()["dead_lettered"]) == (0, 0), nacks
    first: dict[str, Any] = {}
    for event in world.arrivals:  # at-least-once: the first announcement of each
        if event.data_id.exposure == WARM_UP:
            continue
        key = event.data_id.key
        if key not in first or event.published_time < first[key].published_time:
            first[key] = event
    stored_to_announced = [(e.published_time - e.stored_time).total_seconds() for e in first.values()]
    typical = statistics.median(stored_to_announced)
    print(  # the figures functions/register/README.md quotes
        f"failover: {len(stored_to_announced)} CCDs, stored -> announced median {typical:.2f} s, "
        f"max {max(stored_to_announced):.2f} s, failovers {world.spread.failovers}, nacks 0"
    )
    # a delivery that waited for the relay's backoff would be >= 1 s late plus a redelivery;
    # measured 0.3-0.4 s above the median; the slack is for this shared 2-core machine's load
    assert max(stored_to_announced) < typical + 2.0, (typical, sorted(stored_to_announced)[-5:])
