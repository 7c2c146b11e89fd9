"""``obsingest status``: metrics parsed from Prometheus text, the snapshot drawn (exposures
against the budget, verdict, quarantine, processes), and --once's exit status."""

import json
import socket
import threading
from datetime import UTC, datetime

import pytest
from rich.console import Console

from obsingest.registry import engine
from obsingest.registry.completeness import FROM_MANIFEST, summarize
from obsingest_cli.main import main
from obsingest_cli.script.status_snapshot import MetricsSource, Snapshot, parse_metrics
from obsingest_cli.script.status_view import render
from tests.unit.obsingest.registry.conftest import E1, E2, night  # noqa: F401

pytestmark = pytest.mark.unit

EXPOSITION = """\
# HELP obsingest_ccds_dead_lettered_total Messages dead-lettered
# TYPE obsingest_ccds_dead_lettered_total counter
obsingest_ccds_dead_lettered_total{component="relay",reason="push-failed"} 2.0
obsingest_ccds_dead_lettered_total{component="assembler",reason="bad-chunk"} 1.0
obsingest_ccds_dead_lettered_created{component="relay",reason="push-failed"} 1.7e9
# TYPE obsingest_edge_spool_ccds gauge
obsingest_edge_spool_ccds{state="seen"} 3.0
obsingest_edge_spool_ccds{state="sent"} 4.0
obsingest_edge_spool_ccds{state="acknowledged"} 900.0
# TYPE obsingest_assembler_consumer_lag_messages gauge
obsingest_assembler_consumer_lag_messages 12.0
# TYPE some_other_metric gauge
some_other_metric 5.0
"""


def _text(snapshot) -> str:
    console = Console(record=True, width=160)
    console.print(render(snapshot))
    return console.export_text()


def _snapshot(exposures, **kw) -> Snapshot:
    return Snapshot(
        datetime(2026, 11, 22, 4, tzinfo=UTC),
        "sqlite:///r",
        5.0,
        exposures,
        {"total": 0, "by_reason": {}, "recent": []},
        **kw,
    )


def test_metrics_are_summed_per_family_with_their_breakdown():
    found = parse_metrics(EXPOSITION)
    assert found["dead-lettered"] == (3.0, {"push-failed": 2.0, "bad-chunk": 1.0})
    assert found["spooled at the edge"] == (7.0, {"seen": 3.0, "sent": 4.0})  # not acknowledged
    assert found["assembler consumer lag (records)"] == (12.0, {})
    assert "dead letters waiting" not in found


def test_the_view_shows_exposures_verdict_and_processes():
    late = summarize("LSSTCam", E2, 20261122, [0, 1, 2], FROM_MANIFEST, [(0, 2.0), (1, 7.5)], 5.0)
    ok = summarize("LSSTCam", E1, 20261122, [0, 1], FROM_MANIFEST, [(0, 1.0), (1, 2.0)], 5.0)
    text = _text(
        _snapshot(
            [late, ok],
            metrics=[
                MetricsSource("http://edge:9100/metrics", True, values=parse_metrics(EXPOSITION)),
                MetricsSource("http://relay:9101/metrics", False, error="ConnectionError: refused"),
            ],
        )
    )
    assert str(E2) in text and str(E1) in text and "incomplete" in text and "complete" in text
    assert f"last exposure LSSTCam {E2}: MISSED the budget: 1 of 3 CCDs missing; 1 CCDs over 5 s" in text
    assert "dead-lettered: 3 (push-failed=2, bad-chunk=1)" in text
    assert "http://relay:9101/metrics: DOWN (ConnectionError: refused)" in text
    assert _snapshot([late, ok]).exit_code == 1
    assert _snapshot([ok]).exit_code == 0
    assert _snapshot([]).exit_code == 2
    assert "no exposure in the registry yet" in _text(_snapshot([]))


def test_once_prints_and_exits_with_the_verdict_on_the_last_exposure(night, capsys):  # noqa: F811
    url, _ = night
    # the newest exposure (E3: no manifest, one CCD 6 s late) missed the budget
    assert main(["status", "--registry", url, "--once"]) == 1
    out = capsys.readouterr().out
    assert "MISSED the budget" in out and "over_budget" not in out and "over budget" in out
    assert main(["status", "--registry", url, "--once", "--json", "--exposures", "2"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [e["exposure"] for e in data["exposures"]] == [E2 + 1, E2]
    assert data["exit_code"] == 1 and data["budget_seconds"] == 5.0
    # a generous budget: the newest exposure is complete and within it
    assert main(["status", "--registry", url, "--once", "--budget", "60"]) == 0


def test_once_on_a_registry_that_is_not_there_is_2(tmp_path, capsys):
    assert main(["status", "--registry", f"sqlite:///{tmp_path / 'no.sqlite3'}", "--once"]) == 2
    assert "cannot read the registry" in capsys.readouterr().err


def test_once_on_a_registry_server_that_never_answers_is_2_not_a_hang(monkeypatch, capsys):
    """A PostgreSQL that takes the connection and never answers (hung, or a proxy to a dead
    link): --once waited forever (no connect timeout), as did every refresh of the live view.
    The registry engines' connect timeout (``POSTGRES_LIVENESS``) bounds it; 1 s here."""
    monkeypatch.setitem(engine.POSTGRES_LIVENESS, "connect_timeout", 1)
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # never accepted, never answered
        url = f"postgresql+psycopg://u:p@127.0.0.1:{hung.getsockname()[1]}/registry"
        codes: list[int] = []
        run = threading.Thread(target=lambda: codes.append(main(["status", "--registry", url, "--once"])))
        run.daemon = True
        run.start()
        run.join(60)  # a hang detector, not a time limit: the timeout is 1 s
    assert codes == [2]
    assert "cannot read the registry" in capsys.readouterr().err
