"""Schemathesis fuzzes the running presence API (``obsingest serve``, a process of its own, on a
small SQLite night) against its own OpenAPI description: every check Schemathesis has (no 5xx,
documented status codes and content types, answers matching their schemas, schema-invalid input
refused, schema-valid input accepted, ...), then again with ids that exist so the answers with
data are checked too. About half a minute."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.presence import Server, free_port
from benchmarks.presence_night import write_night
from obsingest.registry import Registry
from obsingest.settings import RegistrySettings

pytestmark = pytest.mark.integration

DAY_OBS = 20261123


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    work = tmp_path_factory.mktemp("presence-fuzz")
    url = f"sqlite:///{work / 'registry.sqlite3'}"
    registry = Registry.open(RegistrySettings(url=url))
    night = write_night(registry, day_obs=DAY_OBS, exposures=12, incomplete_every=5, no_manifest_every=4)
    registry.close()
    server = Server(url, free_port(), work / "serve.log")
    try:
        server.wait_ready()
        yield server, night, work
    finally:
        server.stop()


def schemathesis(server, work: Path, *extra: str, config: str | None = None):
    """``st run`` against the server; (exit code, output)."""
    command = [str(Path(sys.executable).parent / "st")]
    if config is not None:
        (work / "schemathesis.toml").write_text(config)
        command += ["--config-file", str(work / "schemathesis.toml")]
    command += [
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        "all",
        "--seed",
        "15",
        "--workers",
        "2",
        *extra,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=work)
    return proc.returncode, proc.stdout + proc.stderr


def test_no_generated_request_breaks_the_api_or_its_contract(api):
    server, _, work = api
    code, output = schemathesis(server, work, "--max-examples", "100")
    assert code == 0, output[-6000:]
    assert " passed" in output and "failures" not in output.split("SUMMARY")[-1]
    log = (work / "serve.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def test_answers_about_data_that_exists_match_the_contract(api):
    server, night, work = api
    exposure = night.exposures[4]  # incomplete (every 5th), with a manifest
    config = f"""
[[operations]]
include-path = "/v1/datasets/{{dataset_id}}"
parameters = {{ dataset_id = "{night.dataset_ids[7]}" }}

[[operations]]
include-path = "/v1/exposures/{{instrument}}/{{exposure}}"
parameters = {{ instrument = "LSSTCam", exposure = {exposure} }}

[[operations]]
include-path = "/v1/ccds/{{instrument}}/{{exposure}}/{{detector}}"
parameters = {{ instrument = "LSSTCam", exposure = {exposure} }}

[[operations]]
include-path = "/v1/nights/{{instrument}}/{{day_obs}}"
parameters = {{ instrument = "LSSTCam", day_obs = {DAY_OBS} }}
"""
    code, output = schemathesis(
        server, work, "--max-examples", "30", "--phases", "examples,fuzzing", config=config
    )
    assert code == 0, output[-6000:]
    assert "Missing test data" not in output and "Unmatched filters" not in output, output
    assert server.get(f"/v1/exposures/LSSTCam/{exposure}")["status"] == "incomplete"
    assert "Traceback" not in (work / "serve.log").read_text()
