"""The demo end to end with small CCDs and every kind of bad input injected."""

import json
import subprocess
import sys

import pytest

from obsingest import avro
from obsingest.messages import ExposureSummary
from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from obsingest_cli.demo.faults import EXPECTED_REASONS

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "obsingest_cli",
            "demo",
            "--exposures",
            "3",
            "--detectors",
            "9",
            "--ccd-size",
            "small",
            "--workdir",
            str(workdir),
            "--inject-bad",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return workdir, proc.stdout


def test_every_good_ccd_registered_exactly_once(demo):
    workdir, _ = demo
    registry = Registry.open(RegistrySettings(url=f"sqlite:///{workdir / 'registry.sqlite3'}"))
    rows = registry.datasets()
    registry.close()
    keys = [(r["exposure"], r["detector"]) for r in rows]
    assert len(keys) == len(set(keys)) == 27
    assert {d for _, d in keys} == set(range(9))
    assert len({e for e, _ in keys}) == 3


def test_three_complete_summaries(demo):
    workdir, stdout = demo
    lines = (workdir / "summaries.jsonl").read_text().splitlines()
    summaries = [ExposureSummary.from_json_dict(json.loads(line)) for line in lines]
    assert len(summaries) == 3
    for s in summaries:
        assert (s.expected, s.arrived, s.completeness, s.missing_detectors) == (9, 9, 1.0, [])
        assert s.status in {"OK", "OVER_BUDGET"}
        assert 0 < s.latency_p50 <= s.latency_p95 <= s.latency_max
        assert str(s.exposure) in stdout


def test_arrivals_archive_and_plot(demo):
    workdir, _ = demo
    arrivals = list(avro.read_container(workdir / "arrivals.avro", "ArrivalEvent"))
    # 27 first announcements + 1 republished by the injected re-delivery (same dataset id)
    assert len(arrivals) == 28
    assert len({a["dataset_id"] for a in arrivals}) == 27
    for a in arrivals:
        assert a["readout_time"] <= a["compressed_time"] <= a["stored_time"]
        assert a["stored_time"] <= a["registered_time"] <= a["published_time"]
    assert (workdir / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list(avro.read_container(workdir / "manifests.avro", "ExposureManifest"))) == 3


def test_every_bad_input_quarantined_with_its_reason(demo):
    workdir, stdout = demo
    registry = Registry.open(RegistrySettings(url=f"sqlite:///{workdir / 'registry.sqlite3'}"))
    rows = registry.quarantined()
    registry.close()
    reasons = sorted(r["reason"] for r in rows)
    assert reasons == sorted(EXPECTED_REASONS.values())
    assert "dead-lettered" not in stdout
    assert not list((workdir / "store" / ".notifications-dlq").iterdir())


def test_registry_list_cli(demo):
    workdir, _ = demo
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "obsingest_cli",
            "registry",
            "list",
            "--json",
            "--registry",
            f"sqlite:///{workdir / 'registry.sqlite3'}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(json.loads(proc.stdout)) == 27


def test_manifests_land_in_the_registry_and_presence_sees_complete_exposures(demo):
    from obsingest.registry.presence import PresenceReader

    workdir, _ = demo
    url = f"sqlite:///{workdir / 'registry.sqlite3'}"
    reader = PresenceReader.open(RegistrySettings(url=url), budget_seconds=5.0)
    try:
        exposures = reader.latest(10)
    finally:
        reader.close()
    assert len(exposures) == 3
    for e in exposures:
        assert (e.expected_source, e.expected, e.registered, e.missing) == ("manifest", 9, 9, ())
        assert e.status in {"complete", "over_budget"} and e.latency_max > 0
    proc = subprocess.run(
        [sys.executable, "-m", "obsingest_cli", "status", "--registry", url, "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    snapshot = json.loads(proc.stdout)
    assert proc.returncode == (0 if exposures[0].status == "complete" else 1)
    assert snapshot["exit_code"] == proc.returncode
