"""Every long-running process serves ``/metrics``, and what it serves agrees with what happened.

The whole pipeline runs as it is deployed (the chaos suite's ``World``: the DAQ night player, the
edge service, the GCS emulator or Kafka + the assembler, the relay, the register function under
functions-framework, PostgreSQL, the facility service), plus the presence API (``obsingest
serve``), each process with a metrics port of its own. After a small night has settled, each
endpoint is scraped as Prometheus would and parsed with ``prometheus_client``'s own parser; the
counts are compared with the registry's rows and the arrivals subscriber's deliveries, never with
the code's own claims. Only names from the metric catalogue (``obsingest/metrics.py``) may appear.
The direct world also publishes the night's manifests (``daq night --publish-manifests`` -> the
manifests relay -> ``on_manifest``): one ExposureIngested per exposure arrives on
``exposures-ingested``, and the exposures counted closed agree with it.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.world import DAY_OBS, INSTRUMENT, World, WorldOptions
from tests.integration.fixtures.private_stack import PrivateStack, free_port
from tests.integration.fixtures.service_process import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EXPOSURES, DETECTORS = 2, 4
CCDS = EXPOSURES * DETECTORS


class _SharedKafka:
    """The shared stack's broker for the Kafka world (topics are the world's own)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def env(self) -> dict[str, str]:
        return {"KAFKA_BOOTSTRAP_SERVERS": self.bootstrap}


@pytest.fixture(scope="module")
def private_stack() -> Iterator[PrivateStack]:
    stack = PrivateStack(["pubsub", "gcs", "postgres"]).up()
    try:
        yield stack
    finally:
        stack.down()


def _scrape(url: str) -> dict[str, Any]:
    """family name -> {(sample name, sorted labels): value}, as a Prometheus server reads it."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200, url
        assert reply.headers.get_content_type() == "text/plain", reply.headers
        text = reply.read().decode()
    families: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        samples = families.setdefault(family.name, {})
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return families


def _value(families: dict[str, Any], sample: str, **labels: str) -> float:
    """Sum of ``sample`` over the series whose labels include ``labels``."""
    total = 0.0
    for samples in families.values():
        for (name, series), value in samples.items():
            if name == sample and set(labels.items()) <= set(series):
                total += value
    return total


def _catalogued(families: dict[str, Any]) -> set[str]:
    """Families that are neither ours (the catalogue) nor the client library's process ones."""
    from obsingest.metrics import CATALOGUE

    ours = {n for spec in CATALOGUE for n in (spec.name, spec.name.removesuffix("_total"))}
    library = ("process_", "python_")
    # the text format carries a counter's or histogram's start time as a family of its own
    return {n for n in families if n.removesuffix("_created") not in ours and not n.startswith(library)}


def _wait(what: str, done: Any, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not settled after {timeout} s: {what}"
        time.sleep(1.0)


def _run_world(name: str, stack: PrivateStack, tmp_path: Path, **options: Any) -> World:
    kafka = options.pop("kafka", None)
    return World(
        name, stack, tmp_path, WorldOptions(metrics=True, facility_every=3.0, **options), kafka=kafka
    )


def _settle(world: World) -> None:
    world.play(EXPOSURES, DETECTORS, interval=2.0)

    def registered_and_announced() -> bool:
        rows = world.read(world.registry.datasets)
        assert world.observer is not None
        announced = {a.dataset_id for a in world.observer.announcements()}
        return len(rows) == CCDS and {str(r["id"]) for r in rows} <= announced

    _wait(f"{CCDS} CCDs registered and announced", registered_and_announced)


def _assert_pipeline_metrics(world: World) -> dict[str, dict[str, Any]]:
    scraped = {name: _scrape(url) for name, url in world.metrics_urls.items()}
    for name, families in scraped.items():
        assert not _catalogued(families), f"{name} serves names outside the catalogue"
        assert _value(families, "obsingest_build_info") == 1, name

    # the edge acknowledges a CCD once the store has it: poll, the scrape may precede the ack
    _wait(
        "edge acknowledged every CCD",
        lambda: (
            _value(
                _scrape(world.metrics_urls["edge"]),
                "obsingest_ccds_total",
                component="edge",
                outcome="acknowledged",
            )
            == CCDS
        ),
        timeout=60,
    )
    edge = _scrape(world.metrics_urls["edge"])
    assert _value(edge, "obsingest_ccds_total", component="edge", outcome="seen") == CCDS
    assert _value(edge, "obsingest_edge_stage_seconds_count", stage="send") == CCDS
    assert _value(edge, "obsingest_edge_spool_free_bytes") > 0
    assert _value(edge, "obsingest_edge_refusing_new_work") == 0

    function = scraped["function"]
    assert _value(function, "obsingest_ccds_total", component="register", outcome="registered") == CCDS
    assert _value(function, "obsingest_ccds_quarantined_total") == 0
    for stage in ("stored", "registered", "announced"):
        assert (
            _value(function, f"obsingest_readout_to_{stage}_seconds_count", instrument=INSTRUMENT) == CCDS
        ), stage
    # every registration in the histogram; how many within the 5 s budget depends on the
    # machine's load (a latency figure for the benchmarks, not a pass/fail here)
    bucket = "obsingest_readout_to_registered_seconds_bucket"
    assert _value(function, bucket, le="+Inf") == CCDS
    assert _value(function, bucket, le="1.0") <= _value(function, bucket, le="5.0") <= CCDS
    assert _value(function, "obsingest_registry_operation_seconds_count") >= CCDS

    relay = scraped["relay"]
    # canaries take the CCDs' path through the relay: at least every CCD's notification
    assert _value(relay, "obsingest_ccds_total", component="relay", outcome="delivered") >= CCDS
    assert _value(relay, "obsingest_ccds_dead_lettered_total") == 0

    # the facility's canary: written, seen by the function, and its age exported
    _wait(
        "the facility saw a canary come back",
        lambda: (
            _value(
                _scrape(world.metrics_urls["facility"]), "obsingest_notification_canaries_total", event="seen"
            )
            >= 1
        ),
        timeout=90,
    )
    facility = _scrape(world.metrics_urls["facility"])
    assert "obsingest_notification_canary_age_seconds" in facility
    assert _value(facility, "obsingest_dead_letters_waiting") == 0
    return scraped


def _assert_exposures_ingested(world: World) -> None:
    """One ExposureIngested per exposure, complete, its status what its own latencies say (ok,
    or over_budget naming the late CCDs: on a loaded machine some are); each exposure counted
    closed once, under that status, by whichever process closed it (the CCDs' function, the
    manifests' one, or the facility's sweep of a lost check)."""
    ingested = world.ingested
    assert ingested is not None
    _wait(f"{EXPOSURES} ExposureIngested", lambda: len(ingested.per_exposure()) == EXPOSURES, timeout=90)
    events = {item.event.exposure: item.event for item in ingested.events()}
    assert len(events) == EXPOSURES and ingested.snapshot()["undecodable"] == 0
    assert all(len(v) == 1 for v in ingested.per_exposure().values())
    for event in events.values():
        assert (event.instrument, event.day_obs) == (INSTRUMENT, DAY_OBS)
        assert event.status == ("over_budget" if event.over_budget else "ok"), event
        assert set(event.over_budget) <= set(event.detectors)
        assert event.registered == event.expected == DETECTORS
        assert event.missing_detectors == [] and event.manifest_known
        assert len(event.detectors) == DETECTORS
    closers = ("function", "manifest-function", "facility")
    scraped = {name: _scrape(world.metrics_urls[name]) for name in closers}
    completed = "obsingest_exposures_completed_total"
    for status in ("ok", "over_budget"):
        closed = sum(_value(s, completed, status=status) for s in scraped.values())
        assert closed == sum(e.status == status for e in events.values()), status
    assert sum(_value(s, completed) for s in scraped.values()) == EXPOSURES  # nothing else
    closed_by_functions = [
        s for name, s in scraped.items() if name != "facility" and _value(s, completed) > 0
    ]
    assert closed_by_functions, "no register function counted an exposure closed"
    for families in closed_by_functions:
        assert _value(families, "obsingest_last_exposure_missing_ccds") == 0


def test_every_process_serves_metrics_direct(private_stack: PrivateStack, tmp_path: Path) -> None:
    world = _run_world("metrics-direct", private_stack, tmp_path, manifests=True)
    presence: ServiceProcess | None = None
    try:
        with private_stack.use():
            world.start()
            _settle(world)
            # first the exposures closed: their manifests may come late (the relay backs off
            # while the manifests' function starts), and until its first manifest that
            # function has built nothing to export
            _assert_exposures_ingested(world)
            _assert_pipeline_metrics(world)

            port = free_port()
            base = f"http://127.0.0.1:{port}"
            presence = ServiceProcess(
                "presence",
                [
                    sys.executable,
                    "-m",
                    "obsingest_cli",
                    "serve",
                    "--registry",
                    world.registry_url,
                    "--port",
                    str(port),
                ],
                world.base_env(),
                world.logs,
                ready=lambda: _listening(port),
            ).start(90)
            night = _get_json(f"{base}/v1/nights/{INSTRUMENT}/{DAY_OBS}")
            assert len(night["exposures"]) == EXPOSURES
            served = _scrape(f"{base}/metrics")
            assert not _catalogued(served)
            ok = _value(served, "obsingest_presence_requests_total", route="night", code="2xx")
            assert ok == 1
            assert _value(served, "obsingest_presence_request_seconds_count", route="night") == 1
    finally:
        if presence is not None:
            presence.close()
        world.close()


def test_every_process_serves_metrics_kafka(private_stack: PrivateStack, tmp_path: Path, kafka: Any) -> None:
    shared = _SharedKafka(kafka.bootstrap_servers)
    world = _run_world("metrics-kafka", private_stack, tmp_path, transport="kafka", kafka=shared)
    try:
        with private_stack.use():
            world.start()
            _settle(world)
            _assert_pipeline_metrics(world)
            assembler = _scrape(world.metrics_urls["assembler"])
            assert not _catalogued(assembler)
            assert _value(assembler, "obsingest_ccds_total", component="assembler", outcome="stored") == CCDS
            assert _value(assembler, "obsingest_assembler_open_files") == 0
            assert "obsingest_assembler_consumer_lag_messages" in assembler
    finally:
        world.close()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _get_json(url: str) -> Any:
    import json

    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())
