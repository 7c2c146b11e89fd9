"""The Grafana dashboard parses, its PromQL parses, and it names only metrics that exist."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from obsingest.metrics import CATALOGUE
from tests.unit.infra.test_alert_rules import exposed_names, metric_names

pytestmark = pytest.mark.unit

DASHBOARD = Path(__file__).resolve().parents[3] / "infra" / "grafana" / "obsingest.json"
#: Prometheus' own series: scrape health, and firing alerts for the annotation layer.
PROMETHEUS_SERIES = {"up", "ALERTS"}
#: Grafana's interval variables, replaced by a duration so the expression parses as PromQL.
GRAFANA_DURATIONS = re.compile(r"\$\{?__(rate_interval|interval|range)\b\}?")
#: Catalogue metrics not drawn, with the reason.
NOT_DRAWN = {
    # the panel computes time() - last_seen instead, which also works across restarts
    "obsingest_notification_canary_age_seconds",
    # the completed counter and missing CCDs carry the same; drawn as "last exposure" stats
    "obsingest_last_exposure_completed_timestamp_seconds",
}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(items: list[dict]) -> Iterator[dict]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def expressions(dashboard: dict) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and the annotation queries."""
    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            yield f"annotation {annotation['name']!r}", annotation["expr"]


def template_metrics(dashboard: dict) -> Iterator[tuple[str, str]]:
    """Metric names in ``label_values(metric, label)`` variable queries (Grafana, not PromQL)."""
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        match = re.fullmatch(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*\w+\s*\)", text)
        if variable["type"] == "query":
            assert match, f"variable {variable['name']}: unexpected query {text!r}"
            yield variable["name"], match.group(1)


def test_dashboard_parses_with_unique_ids_inside_the_grid(dashboard: dict) -> None:
    assert dashboard["uid"] == "obsingest" and dashboard["title"]
    ids = [p["id"] for p in panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], f"{panel['title']} has no query"
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_expression_parses_and_names_only_catalogue_metrics(dashboard: dict) -> None:
    known = exposed_names() | PROMETHEUS_SERIES
    seen = 0
    for where, expr in expressions(dashboard):
        names = metric_names(GRAFANA_DURATIONS.sub("5m", expr))
        assert names, f"{where}: selects no metric"
        assert not names - known, f"{where}: not in obsingest/metrics.py: {names - known}"
        seen += 1
    for name, metric in template_metrics(dashboard):
        assert metric in known, f"variable {name}: {metric} not in obsingest/metrics.py"
    assert seen > 20


def test_the_dashboard_draws_the_catalogue(dashboard: dict) -> None:
    used: set[str] = set()
    for _, expr in expressions(dashboard):
        used |= metric_names(GRAFANA_DURATIONS.sub("5m", expr))
    for spec in CATALOGUE:
        if spec.name in NOT_DRAWN:
            continue
        series = {spec.name, f"{spec.name}_bucket", f"{spec.name}_count"}
        assert series & used, f"{spec.name} is not on the dashboard"


def test_latency_panels_mark_the_5_second_budget(dashboard: dict) -> None:
    marked = 0
    for panel in panels(dashboard["panels"]):
        exprs = " ".join(t["expr"] for t in panel.get("targets", []))
        if "readout_to_announced_seconds_bucket" in exprs and panel["type"] == "timeseries":
            if panel["fieldConfig"]["defaults"].get("unit") != "s":
                continue
            steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
            assert any(step["value"] == 5 for step in steps), panel["title"]
            marked += 1
    assert marked >= 2
