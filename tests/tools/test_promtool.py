"""promtool checks the alert rules and the example scrape config, and runs the rules' unit tests
(infra/prometheus/tests/*.yml: every alert fired from synthetic series, and quiet on healthy
ones).

promtool is built from the Go module proxy on first use (infra/prometheus/promtool.py; a cold
build takes minutes, hence the long timeout) into .cache/, then runs locally.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "infra" / "prometheus"
RULE_TESTS = sorted((PROM / "tests").glob("*.yml"))


def _promtool_module():
    spec = importlib.util.spec_from_file_location("obsingest_promtool", PROM / "promtool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def promtool() -> Path:
    return _promtool_module().fetch()


def _run(promtool: Path, *args: str) -> None:
    result = subprocess.run([str(promtool), *args], cwd=PROM, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


@pytest.mark.timeout(3600)
def test_promtool_checks_the_rules_and_the_example_config(promtool: Path) -> None:
    _run(promtool, "check", "rules", "alerts.yml")
    _run(promtool, "check", "config", "prometheus.yml")


@pytest.mark.timeout(3600)
def test_promtool_rule_unit_tests_pass(promtool: Path) -> None:
    assert RULE_TESTS, "no rule unit tests in infra/prometheus/tests/"
    _run(promtool, "test", "rules", *(str(p.relative_to(PROM)) for p in RULE_TESTS))
