"""``obsingest setup`` provisions Kafka topics on the broker the arrivals publisher will use, and
says in one line when Pub/Sub does not answer."""

from __future__ import annotations

import socket
import threading

import pytest

from infra.local import provision
from obsingest.settings import BusSettings
from obsingest_cli.main import main
from obsingest_cli.script.setup import kafka_bootstrap_from_settings

pytestmark = pytest.mark.unit


def test_setup_picks_the_publishers_broker_when_both_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "pubsub,kafka")
    monkeypatch.setenv("OBSINGEST_BUS_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1111")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:2222")
    bus = BusSettings()
    assert kafka_bootstrap_from_settings(bus) == bus.kafka_bootstrap_servers == "127.0.0.1:1111"


def test_the_conventional_variable_alone_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "kafka")
    monkeypatch.delenv("OBSINGEST_BUS_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:2222")
    assert kafka_bootstrap_from_settings(BusSettings()) == "127.0.0.1:2222"


def test_no_kafka_backend_means_no_kafka_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "pubsub")
    assert kafka_bootstrap_from_settings(BusSettings()) is None


@pytest.mark.parametrize("listening", [True, False], ids=["hung", "not-there"])
def test_a_pubsub_that_never_answers_is_one_line_and_exit_1_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], listening: bool
) -> None:
    """An emulator that takes the connection and never answers, or none at all: api_core
    retried each admin call for up to 600 s, saying nothing, then ``obsingest setup`` (and the
    facility's repair) died with a traceback. Each call is now bounded (ADMIN_TIMEOUT, 1 s here)."""
    monkeypatch.setattr(provision, "ADMIN_TIMEOUT", 1.0)
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "pubsub")
    monkeypatch.delenv("OBSINGEST_REGISTRY_URL", raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        if listening:
            server.listen(8)  # never accepted, never answered
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{server.getsockname()[1]}")
        codes: list[int] = []
        run = threading.Thread(
            target=lambda: codes.append(main(["setup", "--bucket", "b", "--project", "p"]))
        )
        run.daemon = True
        run.start()
        run.join(60)  # a hang detector, not a time limit: the bound is 1 s
    assert codes == [1]
    err = capsys.readouterr().err
    assert "obsingest setup: error (service-unavailable): Pub/Sub at 127.0.0.1:" in err, err
    assert "did not answer within 1 s" in err
    assert "Traceback" not in err
