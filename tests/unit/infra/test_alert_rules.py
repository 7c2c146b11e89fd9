"""Alert rules read as data: every alert has a severity and says what to do, names only
catalogue metrics and is tested both firing and quiet. promtool itself runs in
tests/tools/test_promtool.py."""

from __future__ import annotations

from pathlib import Path

import promql_parser
import pytest
import yaml

from obsingest.metrics import CATALOGUE, LABEL_VALUES

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PROM = ROOT / "infra" / "prometheus"
RULE_TESTS = sorted((PROM / "tests").glob("*.yml"))
#: Prometheus' own series, not obsingest's: scrape health.
PROMETHEUS_SERIES = {"up"}


def exposed_names() -> set[str]:
    """Every series name the catalogue exposes (histograms as _bucket/_sum/_count)."""
    names: set[str] = set()
    for spec in CATALOGUE:
        if spec.kind == "histogram":
            names |= {f"{spec.name}_bucket", f"{spec.name}_sum", f"{spec.name}_count"}
        else:
            names.add(spec.name)
    return names


def metric_names(expr: str) -> set[str]:
    """Series names a PromQL expression selects (parsed, so a syntax error fails here too)."""
    found: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name is not None:
            found.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def alert_rules() -> list[dict]:
    groups = yaml.safe_load((PROM / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_every_alert_has_severity_summary_and_what_to_do() -> None:
    rules = alert_rules()
    assert len({r["alert"] for r in rules}) == len(rules)
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert len(rule["annotations"]["description"]) > 80, f"{rule['alert']}: say what to do"


def test_alert_expressions_use_only_catalogue_metrics() -> None:
    known = exposed_names() | PROMETHEUS_SERIES
    for rule in alert_rules():
        unknown = metric_names(rule["expr"]) - known
        assert not unknown, f"{rule['alert']}: not in obsingest/metrics.py: {unknown}"


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - fired == set(), "alerts never fired by a rule test"
    assert names - quiet == set(), "alerts never shown quiet on healthy series"
    assert (fired | quiet) <= names, "rule tests name alerts that do not exist"


def test_scrape_config_has_one_job_per_exporting_process() -> None:
    config = yaml.safe_load((PROM / "prometheus.yml").read_text())
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert jobs == {f"obsingest-{c}" for c in LABEL_VALUES["component"]}
    assert config["rule_files"] == ["alerts.yml"]
