"""`obsingest demo --stack local` end to end on the real services, over both transports, with
every kind of bad input injected: every good CCD registered exactly once in PostgreSQL, every
bad input quarantined with its reason, nothing dead-lettered."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from obsingest.messages import ExposureSummary
from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from obsingest_cli.demo.faults import EXPECTED_REASONS

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("transport", ["direct", "kafka"])
def test_demo_on_the_local_stack(transport, kafka, pubsub, gcs, postgres_server, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "obsingest_cli",
            "demo",
            "--stack",
            "local",
            "--transport",
            transport,
            "--exposures",
            "2",
            "--detectors",
            "9",
            "--ccd-size",
            "small",
            "--workdir",
            str(tmp_path),
            "--inject-bad",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    url = Path(tmp_path / "registry-url.txt").read_text().strip()
    assert url.startswith("postgresql")
    registry = Registry.open(RegistrySettings(url=url))
    try:
        rows = registry.datasets()
        quarantined = registry.quarantined()
    finally:
        registry.close()
    keys = [(r["exposure"], r["detector"]) for r in rows]
    assert len(keys) == len(set(keys)) == 18
    assert {r["transport"] for r in rows} == {transport}
    assert sorted(q["reason"] for q in quarantined) == sorted(EXPECTED_REASONS.values())
    summaries = [
        ExposureSummary.from_json_dict(json.loads(line))
        for line in (tmp_path / "summaries.jsonl").read_text().splitlines()
    ]
    assert [(s.expected, s.arrived, s.missing_detectors) for s in summaries] == [(9, 9, [])] * 2
    assert "dead-lettered" not in proc.stdout
    # the manifests went through the register function's on_manifest into PostgreSQL
    from obsingest.registry.presence import PresenceReader

    reader = PresenceReader.open(RegistrySettings(url=url), budget_seconds=5.0)
    try:
        answers = reader.latest(10)
    finally:
        reader.close()
    assert [(a.expected_source, a.expected, a.registered, a.missing) for a in answers] == [
        ("manifest", 9, 9, ())
    ] * 2
    # the demo's subscriber on exposures-ingested received exactly one event per exposure
    ingested = [json.loads(line) for line in (tmp_path / "exposures-ingested.jsonl").read_text().splitlines()]
    assert sorted(e["exposure"] for e in ingested) == sorted({r["exposure"] for r in rows})
    assert [(e["expected"], e["registered"], e["missing_detectors"]) for e in ingested] == [(9, 9, [])] * 2
