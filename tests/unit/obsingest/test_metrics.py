"""The metric catalogue: Prometheus conventions, closed label sets, SLA buckets, and /metrics."""

from __future__ import annotations

import ast
import importlib
import math
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from flask import Flask
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from obsingest.dataid import INSTRUMENTS
from obsingest.metrics import (
    CATALOGUE,
    COMPONENT_OUTCOMES,
    CONSTANT_LABELS,
    FORBIDDEN_LABELS,
    LABEL_VALUES,
    PUSH_FAILURES,
    REASONS,
    Metrics,
    private_metrics,
    reason_label,
)
from obsingest.metrics_http import (
    MetricsPortUnavailable,
    MetricsSettings,
    serve_metrics,
    with_metrics_endpoint,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SLA_BUCKETS = [0.25, 0.5, 1, 2, 3, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 25, 30, 45, 60]
READOUT_HISTOGRAMS = [
    "obsingest_readout_to_stored_seconds",
    "obsingest_readout_to_registered_seconds",
    "obsingest_readout_to_announced_seconds",
]


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry(), strict=True)


def sample(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def scrape_families(text: str) -> dict[str, Metric]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def family_names(spec) -> set[str]:
    """Names a family may carry: the client strips ``_total`` (and ``_info`` in-process)."""
    return {spec.name, spec.name.removesuffix("_total"), spec.name.removesuffix("_info")}


# --- the catalogue follows the conventions --------------------------------------------------------
@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_names_follow_prometheus_conventions(spec) -> None:
    name = spec.name
    assert re.fullmatch(r"obsingest_[a-z][a-z0-9_]*[a-z0-9]", name), name
    assert "__" not in name
    assert spec.help.strip(), f"{name} has no help text"
    # base units only: seconds and bytes, never ms/minutes/kilobytes
    units = {"ms", "milliseconds", "minutes", "hours", "kb", "mb", "gb", "kilobytes", "megabytes"}
    assert not units & set(name.split("_")), name
    if spec.kind == "counter":
        assert name.endswith("_total"), f"counter {name} must end in _total"
    else:
        assert not name.endswith("_total"), f"only counters end in _total: {name}"
    if spec.kind == "histogram":
        assert name.endswith(("_seconds", "_bytes")), f"histogram {name} needs a unit suffix"
        assert list(spec.buckets) == sorted(spec.buckets) and spec.buckets
    if spec.kind == "info":
        assert name.endswith("_info")
    if "timestamp" in name:
        assert name.endswith("_timestamp_seconds"), name
    if {"latency", "age", "duration"} & set(name.split("_")):
        assert name.endswith("_seconds"), f"{name} measures time: unit _seconds"
    assert spec.exported_by, f"{name} names no exporting process"
    assert set(spec.exported_by) <= LABEL_VALUES["component"]


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_labels_are_bounded_closed_sets(spec) -> None:
    for label in spec.labels:
        assert label not in FORBIDDEN_LABELS, f"{spec.name}: {label} is unbounded"
        assert label in LABEL_VALUES or label in CONSTANT_LABELS, f"{spec.name}: {label} not closed"
        assert label not in {"le", "quantile", "job", "instance"}, f"{spec.name}: reserved {label}"
    # < 100: the reasons grew past 64 with resource exhaustion's eight (issue 21); still a few
    # hundred series per metric at most
    for values in LABEL_VALUES.values():
        assert "other" not in values and len(values) < 100


def test_catalogue_names_are_unique_and_registered_once(metrics: Metrics) -> None:
    names = [spec.name for spec in CATALOGUE]
    assert len(names) == len(set(names))
    exposed = {m.name for m in metrics.registry.collect()}
    for spec in CATALOGUE:
        assert family_names(spec) & exposed, spec.name


@pytest.mark.parametrize("name", READOUT_HISTOGRAMS)
def test_readout_histograms_use_the_sla_buckets(metrics: Metrics, name: str) -> None:
    stage = name.removeprefix("obsingest_readout_to_").removesuffix("_seconds")
    metrics.readout_latency(stage, 4.2, transport="kafka", instrument="LSSTCam")
    buckets = [
        float(s.labels["le"])
        for f in metrics.registry.collect()
        if f.name == name
        for s in f.samples
        if s.name.endswith("_bucket")
    ]
    assert buckets == [*SLA_BUCKETS, math.inf]
    labels = {"transport": "kafka", "instrument": "LSSTCam"}
    assert sample(metrics, f"{name}_bucket", le="3.0", **labels) == 0
    assert sample(metrics, f"{name}_bucket", le="5.0", **labels) == 1
    assert sample(metrics, f"{name}_sum", **labels) == pytest.approx(4.2)


def test_instrument_label_values_are_the_known_instruments() -> None:
    assert LABEL_VALUES["instrument"] == set(INSTRUMENTS)


def _reasons_in_code() -> dict[str, str]:
    """Every ``reason = "..."`` class attribute or ``reason="..."`` class keyword and assembler
    dlq reason in the pipeline's code."""
    found: dict[str, str] = {}
    skip: tuple[str, ...] = ()  # the composition root and the local stack live elsewhere
    for top in ("obsingest", "producers", "functions"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(skip):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                for keyword in node.keywords:
                    if keyword.arg == "reason" and isinstance(keyword.value, ast.Constant):
                        found[str(keyword.value.value)] = f"{rel}:{node.name}"
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target = stmt.targets[0]
                    elif isinstance(stmt, ast.AnnAssign):
                        target = stmt.target
                    else:
                        continue
                    value = stmt.value
                    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                        continue
                    name = getattr(target, "id", None)
                    if value.value and (name == "reason" or node.name == "PoisonReason"):
                        found[value.value] = f"{rel}:{node.name}"
    return found


def test_every_reason_in_the_code_is_in_the_closed_set_once_its_class_is_defined() -> None:
    found = _reasons_in_code()
    assert {"corrupt-file", "chunk-conflict", "registry-unavailable"} <= set(found)
    for where in sorted(set(found.values())):  # define every error class of the pipeline
        importlib.import_module(where.split(":")[0].removesuffix(".py").replace("/", "."))
    missing = {reason: where for reason, where in found.items() if reason not in REASONS}
    assert not missing, f"reasons no error class declares (ObsIngestError.reasons): {missing}"
    assert len(set(found) | set(PUSH_FAILURES)) < 100  # the label set stays small


# --- recording ----------------------------------------------------------------------------------
def test_ccd_outcomes_and_reasons(metrics: Metrics) -> None:
    metrics.ccd("register", "registered", n=3)
    metrics.ccd("register", "quarantined", reason="corrupt-file")
    metrics.ccd("relay", "dead_lettered", reason="HTTP 503: retriable: registry down")
    metrics.ccd("edge", "refused")
    assert sample(metrics, "obsingest_ccds_total", component="register", outcome="registered") == 3
    assert sample(metrics, "obsingest_ccds_total", component="register", outcome="quarantined") == 1
    assert (
        sample(metrics, "obsingest_ccds_quarantined_total", component="register", reason="corrupt-file") == 1
    )
    assert sample(metrics, "obsingest_ccds_dead_lettered_total", component="relay", reason="http-5xx") == 1
    assert sample(metrics, "obsingest_ccds_total", component="edge", outcome="refused") == 1


def test_counts_are_read_back_from_the_registry_and_private_registries_count_apart() -> None:
    """The readers (/health, status, benchmarks, tests) read the counters themselves."""
    one, two = private_metrics(), private_metrics()
    one.start("edge")
    assert one.count("edge", "seen") == 0 and one.count("edge", "duplicates") == 0
    one.ccd("edge", "seen", n=3)
    one.add("edge", "duplicates")
    one.counter("edge", "raw_bytes").inc(10)
    one.add("edge", "sent_bytes", 0)  # nothing to count: no series made
    one.ccd("edge", "retried", reason="transient")
    one.ccd("edge", "retried", reason="transient")
    one.ccd("relay", "retried")  # no reason: only the outcome
    assert (one.count("edge", "seen"), one.count("edge", "duplicates")) == (3, 1)
    assert one.value("obsingest_service_counts_total", component="edge", counter="raw_bytes") == 10
    by_reason = one.by_label("obsingest_ccds_retried_total", "reason", component="edge")
    assert by_reason == {"transient": 2}
    assert one.by_label("obsingest_ccds_retried_total", "reason", component="relay") == {}
    assert one.count("relay", "retried") == 1
    assert two.count("edge", "seen") == 0 and two.value("obsingest_no_such_total") == 0


def test_reason_label_classifies_free_text() -> None:
    assert reason_label("checksum-conflict") == "checksum-conflict"
    assert reason_label("HTTP 404: no such thing") == "http-4xx"
    assert reason_label("no response: connection refused") == "no-response"
    assert reason_label("raw/LSSTCam/20260101/7/x.fits is odd") == "other"


def test_values_outside_a_closed_set_become_other_or_raise() -> None:
    lenient = Metrics(CollectorRegistry())
    lenient.ccd("register", "exploded")
    lenient.readout_latency("stored", 1.0, transport="carrier-pigeon", instrument="HSC")
    assert sample(lenient, "obsingest_ccds_total", component="register", outcome="other") == 1
    assert (
        sample(lenient, "obsingest_readout_to_stored_seconds_count", transport="other", instrument="other")
        == 1
    )
    strict = Metrics(CollectorRegistry(), strict=True)
    with pytest.raises(ValueError, match="instrument='HSC'"):
        strict.readout_latency("stored", 1.0, transport="direct", instrument="HSC")
    with pytest.raises(ValueError, match="no outcome 'stored'"):
        strict.ccd("register", "stored")  # an outcome of the assembler, not of register


def test_edge_spool_gauges(metrics: Metrics) -> None:
    metrics.edge_spool({"seen": 4, "sent": 2}, 12.5, 10**9, refusing="spool-full")
    assert sample(metrics, "obsingest_edge_spool_ccds", state="seen") == 4
    assert sample(metrics, "obsingest_edge_spool_ccds", state="compressed") == 0
    assert sample(metrics, "obsingest_edge_oldest_unacknowledged_age_seconds") == 12.5
    assert sample(metrics, "obsingest_edge_spool_free_bytes") == 10**9
    assert sample(metrics, "obsingest_edge_refusing_new_work", refusal="spool-full") == 1
    assert sample(metrics, "obsingest_edge_refusing_new_work", refusal="source-unreadable") == 0
    metrics.edge_spool({}, 0, 10**10)
    assert sample(metrics, "obsingest_edge_refusing_new_work", refusal="spool-full") == 0


def test_registry_operation_times_and_counts_errors(metrics: Metrics) -> None:
    from obsingest.errors import ServiceUnavailable

    with metrics.registry_operation("register"):
        pass
    with pytest.raises(ServiceUnavailable), metrics.registry_operation("register"):
        raise ServiceUnavailable("db down")
    assert sample(metrics, "obsingest_registry_operation_seconds_count", operation="register") == 2
    assert (
        sample(metrics, "obsingest_registry_errors_total", operation="register", reason="service-unavailable")
        == 1
    )


def test_canary_age_and_timestamp(metrics: Metrics) -> None:
    age = sample(metrics, "obsingest_notification_canary_age_seconds")
    assert age is not None and math.isnan(age)
    seen_at = time.time() - 30
    metrics.canary("written")
    metrics.canary("seen", at=seen_at)
    assert sample(metrics, "obsingest_notification_canary_last_seen_timestamp_seconds") == seen_at
    age = sample(metrics, "obsingest_notification_canary_age_seconds")
    assert age is not None and 30 <= age < 60
    assert sample(metrics, "obsingest_notification_canaries_total", event="written") == 1


def test_exposure_completion_and_dead_letters(metrics: Metrics) -> None:
    metrics.exposure_completed("LSSTComCam", "over_budget", 6.5, missing_ccds=0, at=1000.0)
    metrics.exposure_completed("LSSTComCam", "incomplete", 3.1, missing_ccds=2, at=1017.0)
    labels = {"instrument": "LSSTComCam"}
    completed = "obsingest_exposures_completed_total"
    assert sample(metrics, completed, status="over_budget", **labels) == 1
    assert sample(metrics, "obsingest_last_exposure_max_latency_seconds", **labels) == 3.1
    assert sample(metrics, "obsingest_last_exposure_missing_ccds", **labels) == 2
    assert sample(metrics, "obsingest_last_exposure_completed_timestamp_seconds", **labels) == 1017
    metrics.dead_letters_waiting("notifications", 7)
    metrics.redrive("notifications", "redriven", n=7)
    assert sample(metrics, "obsingest_dead_letters_waiting", source="notifications") == 7
    assert sample(metrics, "obsingest_redrive_attempts_total", source="notifications", result="redriven") == 7


def test_presence_assembler_and_build_info(metrics: Metrics) -> None:
    metrics.presence_request("exposure", 404, 0.002)
    metrics.assembler_state(120, 3, 45_000_000, 512_000_000)
    metrics.start("assembler")
    assert sample(metrics, "obsingest_presence_requests_total", route="exposure", code="4xx") == 1
    assert sample(metrics, "obsingest_assembler_consumer_lag_messages") == 120
    assert sample(metrics, "obsingest_assembler_held_payload_limit_bytes") == 512_000_000
    info = [s for f in metrics.registry.collect() if f.name == "obsingest_build" for s in f.samples]
    assert info[0].labels["component"] == "assembler" and info[0].value == 1
    # the component's series exist from the start, at 0, so increase() sees the first CCD
    assert sample(metrics, "obsingest_ccds_total", component="assembler", outcome="stored") == 0
    assert sample(metrics, "obsingest_ccds_total", component="register", outcome="stored") is None


def test_reconcile_start_starts_the_canary_clock(metrics: Metrics) -> None:
    before = time.time()
    metrics.start("reconcile")
    started = sample(metrics, "obsingest_notification_canary_last_seen_timestamp_seconds")
    assert started is not None and before <= started <= time.time()
    metrics.start("reconcile")  # idempotent: a second call does not reset the clock
    assert sample(metrics, "obsingest_notification_canary_last_seen_timestamp_seconds") == started
    labels = {"instrument": "LATISS", "status": "incomplete"}
    assert sample(metrics, "obsingest_exposures_completed_total", **labels) == 0


# --- exposing /metrics ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_helper_server_serves_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Metrics(CollectorRegistry(), strict=True)
    m.ccd("assembler", "stored", n=2)
    m.readout_latency("stored", 2.5, transport="kafka", instrument="LATISS")
    monkeypatch.setenv("OBSINGEST_METRICS_PORT", str(_free_port()))
    monkeypatch.setenv("OBSINGEST_METRICS_ADDR", "127.0.0.1")
    server = serve_metrics(registry=m.registry)  # settings read now, from the environment
    assert server is not None
    try:
        resp = requests.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
    finally:
        server.close()
    assert resp.status_code == 200
    families = scrape_families(resp.text)
    for spec in CATALOGUE:
        assert family_names(spec) & set(families), spec.name
    stored = {
        (s.name, s.labels.get("le")): s.value for s in families["obsingest_readout_to_stored_seconds"].samples
    }
    assert stored[("obsingest_readout_to_stored_seconds_bucket", "2.0")] == 0
    assert stored[("obsingest_readout_to_stored_seconds_bucket", "3.0")] == 1
    ccds = families["obsingest_ccds"].samples
    assert [(s.labels, s.value) for s in ccds] == [({"component": "assembler", "outcome": "stored"}, 2.0)]


def test_helper_server_off_at_port_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OBSINGEST_METRICS_PORT", raising=False)
    assert serve_metrics(registry=CollectorRegistry()) is None


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortUnavailable, match=f"127.0.0.1:{port}") as err:
            serve_metrics(MetricsSettings(port=port, addr="127.0.0.1"), CollectorRegistry())
    assert err.value.reason == "metrics-port-unavailable" and not err.value.retriable


def test_flask_app_exposes_metrics_on_its_own_port() -> None:
    m = Metrics(CollectorRegistry(), strict=True)
    m.ccd("register", "duplicate")
    app = Flask("register")
    app.add_url_rule("/", "handle", lambda: "handled")
    app.wsgi_app = with_metrics_endpoint(app.wsgi_app, m.registry)  # type: ignore[method-assign,assignment]  # Flask's middleware hook
    client = app.test_client()
    assert client.get("/").get_data(as_text=True) == "handled"
    resp = client.get("/metrics")
    assert resp.status_code == 200
    families = scrape_families(resp.get_data(as_text=True))
    assert families["obsingest_ccds"].samples[0].labels["outcome"] == "duplicate"


def test_component_outcomes_are_documented_and_catalogue_in_readme() -> None:
    readme = (ROOT / "infra" / "prometheus" / "README.md").read_text()
    for spec in CATALOGUE:
        assert f"`{spec.name}`" in readme, f"{spec.name} missing from infra/prometheus/README.md"
    for component, outcomes in COMPONENT_OUTCOMES.items():
        for outcome in outcomes:
            assert outcome in readme, f"{component}/{outcome} missing from the README"


def test_kernel_imports_stay_free_of_prometheus() -> None:
    """Only obsingest.metrics pulls prometheus_client in; the rest import it lazily."""
    skip = ("cli/", "stack/", "metrics", "__main__")
    kernel = sorted(
        p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        for p in (ROOT / "obsingest").rglob("*.py")
        if not p.relative_to(ROOT / "obsingest").as_posix().startswith(skip)
    )
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in kernel)
    code += "print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False", "a kernel module imports obsingest.metrics at import time"
