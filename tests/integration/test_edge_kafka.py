"""The edge over the chunked Kafka transport (``--to kafka://HOST:PORT/TOPIC``), killed once
mid-night: real broker, the assembler as its own process, a file:// store feeding the register
function, PostgreSQL registry. Every CCD acknowledged by the broker, stored and registered
exactly once (resent chunks are deduplicated by the assembler)."""

from __future__ import annotations

import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

from functions.assembler.main import command
from producers.daq.night import NightPlan, play_night
from tests.integration.fixtures.edge import (
    ROOT,
    EdgeProcess,
    LocalFacility,
    journal_counts,
    journal_items,
    wait_for,
)
from tests.integration.fixtures.handles import KafkaService, unique_name

pytestmark = pytest.mark.integration

EXPOSURES, DETECTORS = 6, 5


def test_edge_over_kafka_survives_a_kill_and_registers_every_ccd_once(
    kafka: KafkaService, postgres: str, tmp_path: Path
) -> None:
    topic, dlq = kafka.new_topic("chunks"), kafka.new_topic("chunks-dlq")
    facility = LocalFacility(tmp_path / "store", postgres)
    argv = command(kafka.bootstrap_servers, topic, dlq, unique_name("assembler"),
                   facility.store_url)  # fmt: skip
    with (tmp_path / "assembler.log").open("wb") as log:
        assembler = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    edge = EdgeProcess(tmp_path / "handoff", tmp_path / "spool",
                       f"kafka://{kafka.bootstrap_servers}/{topic}", tmp_path / "logs", None,
                       "--workers", "2")  # fmt: skip
    total = EXPOSURES * DETECTORS
    try:
        edge.start()
        plan = NightPlan(tmp_path / "handoff", "LSSTCam", EXPOSURES, DETECTORS, interval=1.0,
                         day_obs=20261122, first_seq=600)  # fmt: skip
        night = threading.Thread(target=play_night, args=(plan,))
        night.start()
        wait_for(lambda: journal_counts(edge.spool)["acked"] >= 8, 90, "the first CCDs acked")
        edge.kill9()
        edge.start()
        night.join(timeout=60)
        wait_for(lambda: journal_counts(edge.spool)["acked"] == total, 120,
                 f"all {total} CCDs acknowledged by the broker")  # fmt: skip
        wait_for(lambda: facility.registry.count_datasets() == total, 120,
                 "every CCD assembled, stored and registered")  # fmt: skip
        assert edge.terminate() == 0
        assert {i.status for i in journal_items(edge.spool)} == {"acked"}
        facility.close()
        assert facility.registry.count_datasets() == total
        announced = Counter(facility.arrivals.keys())
        assert len(announced) == total and set(announced.values()) == {1}
        assert facility.registry.quarantined() == []
    finally:
        edge.close()
        assembler.terminate()
        assembler.wait(timeout=30)
