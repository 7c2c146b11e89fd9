"""``obsingest setup`` provisions Kafka topics on the broker the arrivals publisher will use."""

from __future__ import annotations

import pytest

from obsingest.settings import BusSettings
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
