"""``obsingest redrive`` by hand on real Pub/Sub: a dry run counts, a filtered run redrives only
the selected letters (back to the objects topic, history in attributes), the rest stay."""

from __future__ import annotations

import json

import pytest

from obsingest.bus.pull import PubSubPullSource
from obsingest_cli.main import main
from tests.integration.fixtures.handles import GcsService, PostgresServer, PubSubService
from tests.integration.fixtures.pipeline import build_pipeline, wait_for

pytestmark = pytest.mark.integration


def test_manual_redrive_dry_run_and_filter(
    gcs: GcsService,
    pubsub: PubSubService,
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pipe = build_pipeline(
        postgres_server.admin_url, tag="redrive-cli", start_relay=False, arrivals_subscriber=False
    )
    try:
        letters = [
            (
                {
                    "objectId": "raw/a",
                    "dlq_reason": "HTTP 503: retriable: registry unavailable",
                    "dlq_status": "503",
                    "dlq_attempts": "10",
                }
            ),
            (
                {
                    "objectId": "raw/b",
                    "dlq_reason": "HTTP 503: retriable: publish failed",
                    "dlq_status": "503",
                    "dlq_attempts": "10",
                }
            ),
            (
                {
                    "objectId": "raw/c",
                    "dlq_reason": "no response: ConnectionError: refused",
                    "dlq_status": "none",
                    "dlq_attempts": "10",
                }
            ),
        ]
        for attributes in letters:
            pipe.publisher.publish(pipe.bus.objects_dlq_topic, b"{}", attributes=attributes)
        monkeypatch.setenv("OBSINGEST_BUS_PUBSUB_PROJECT", pipe.project)
        wait_for(lambda: pipe.dead_letters() == 3, 30, "three dead letters")

        assert main(["redrive", "--dry-run", "--json"]) == 0
        dry = json.loads(capsys.readouterr().out)
        assert (dry["scanned"], dry["redriven"], dry["dry_run"]) == (3, 3, True)
        assert dry["by_reason"] == {"HTTP 503": 2, "no response": 1}
        assert pipe.dead_letters() == 3  # nothing moved

        assert main(["redrive", "--reason", "registry unavailable", "--json"]) == 0
        done = json.loads(capsys.readouterr().out)
        assert (done["redriven"], done["skipped"]) == (1, 2)
        assert pipe.dead_letters() == 2
        source = PubSubPullSource(pipe.project, pipe.relay.source.path)
        [back] = source.pull(10, 5.0)
        assert back.attributes["objectId"] == "raw/a"
        assert back.attributes["redrive_count"] == "1"
        assert "registry unavailable" in json.loads(back.attributes["redrive_history_1"])["reason"]
        assert not any(key.startswith("dlq_") for key in back.attributes)
        source.close()
        assert pipe.bus.objects_dlq_hold.endswith("-hold")
    finally:
        pipe.close()
