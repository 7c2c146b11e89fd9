"""The transfer harness against real destinations: a local directory, the GCS emulator, Kafka.

Each test runs ``obsingest bench transfer`` as a user would (its own process, spawning its
workers) on small CCDs, then checks what arrived where, that every transfer logged its own
start and end with its data id, and that the JSON has the report's rows. End-to-end runs must
see every CCD announced by the facility side. No timing is asserted: figures belong to
``make bench``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

CCDS = 2
NUMEXP = 3


def run_bench(tmp_path: Path, destination: str, *extra: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "obsingest_cli",
            "bench",
            "transfer",
            "--destination",
            destination,
            "--ccds",
            str(CCDS),
            "--numexp",
            str(NUMEXP),
            "--interval",
            "1.5",
            "--ccd-size",
            "small",
            "--run-dir",
            str(tmp_path / "run"),
            "--json",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "remaining exposures:" in proc.stdout
    result = json.loads(out.read_text())
    check_common(result)
    return result


def check_common(result: dict[str, Any]) -> None:
    records = result["records"]
    assert len(records) == CCDS * NUMEXP
    assert not [r for r in records if r["error"]]
    assert {(r["exposure_index"], r["detector"]) for r in records} == {
        (i, d) for i in range(NUMEXP) for d in range(CCDS)
    }
    assert result["warmup"]["transfers"] == CCDS
    assert result["steady"]["transfers"] == CCDS * (NUMEXP - 1)
    assert result["steady"]["exposures"] == NUMEXP - 1
    # One shared schedule: every worker's readout of an exposure is the same moment.
    for i in range(NUMEXP):
        assert len({r["readout"] for r in records if r["exposure_index"] == i}) == 1
    lines = [json.loads(x) for x in Path(result["log"]).read_text().splitlines()]
    done = {x["data_id"] for x in lines if x["event"] == "transfer.done"}
    started = {x["data_id"] for x in lines if x["event"] == "transfer.start"}
    assert done == started == {r["data_id"] for r in records}


def camera_name(key: str) -> str:
    """The camera's file name of the CCD whose data id key is ``key`` (``LSSTCam/2026.../094``)."""
    from obsingest.dataid import DataId

    instrument, exposure, detector = key.split("/")
    return DataId(instrument, int(exposure), int(detector)).identity().file_name


def check_announced(result: dict[str, Any]) -> None:
    assert result["end_to_end"]
    assert result["latency"]["all"]["announced"] == CCDS * NUMEXP
    assert len(result["arrivals"]) == CCDS * NUMEXP
    stages = {row["stage"] for row in result["stages"]}
    assert {"notify+register", "publish", "readout->announced"} <= stages


def test_file_destination_stores_every_ccd(tmp_path: Path) -> None:
    dest = tmp_path / "store"
    result = run_bench(tmp_path, f"file://{dest}", "--compress")
    assert {r["status"] for r in result["records"]} == {"stored"}
    names = {p.name for p in (dest / "raw").rglob("*.fits")}  # the camera's names, Rubin's layout
    assert len(names) == CCDS * NUMEXP
    assert result["statuses"] == ["stored"]


def test_file_end_to_end_announces_every_ccd(tmp_path: Path) -> None:
    from obsingest.registry import Registry
    from obsingest.settings import RegistrySettings

    work = tmp_path / "facility"
    result = run_bench(tmp_path, f"file://{work}", "--end-to-end")
    check_announced(result)
    registry = Registry.open(RegistrySettings(url=f"sqlite:///{work / 'registry.sqlite3'}"))
    try:
        assert registry.count_datasets() == CCDS * NUMEXP
    finally:
        registry.close()


def test_gcs_destination_uploads_to_the_emulator(tmp_path: Path, gcs: Any) -> None:
    from obsingest.store.gcs import GcsSettings, make_client

    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    result = run_bench(tmp_path, f"gs://{bucket}/bench/run1", "--compress")
    assert result["sender_url"] == f"gs://{bucket}"
    blobs = list(make_client(GcsSettings()).list_blobs(bucket, prefix="bench/run1/"))
    assert len(blobs) == CCDS * NUMEXP
    assert {b.name.rsplit("/", 1)[1] for b in blobs} == {camera_name(r["data_id"]) for r in result["records"]}


def test_gcs_end_to_end_announces_every_ccd(tmp_path: Path, gcs: Any, pubsub: Any, postgres: str) -> None:
    check_announced(run_bench(tmp_path, "gs://ignored", "--end-to-end", "--compress"))


def test_kafka_destination_acks_every_ccd(tmp_path: Path, kafka: Any) -> None:
    topic = f"bench-{uuid.uuid4().hex[:12]}"
    result = run_bench(tmp_path, f"kafka://{topic}")
    assert result["sender_url"] == f"kafka://{kafka.bootstrap_servers}/{topic}"
    assert result["statuses"] == ["acked"]


def test_kafka_end_to_end_announces_every_ccd(
    tmp_path: Path, kafka: Any, gcs: Any, pubsub: Any, postgres: str
) -> None:
    check_announced(run_bench(tmp_path, "kafka://ccd-chunks", "--end-to-end"))
