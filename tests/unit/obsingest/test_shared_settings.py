"""The settings fields every unit shares are declared once (``obsingest.settings``) and read the
same way in every unit that inherits them."""

from __future__ import annotations

import pytest

from functions.assembler.settings import AssemblerSettings
from obsingest import defaults
from obsingest.settings import StoreSettings
from producers.edge.settings import EdgeSettings
from producers.kafka.settings import KafkaProducerSettings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "OBSINGEST_ASSEMBLER_BOOTSTRAP_SERVERS",
        "OBSINGEST_KAFKA_BOOTSTRAP_SERVERS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("cls", "prefix"),
    [(AssemblerSettings, "OBSINGEST_ASSEMBLER_"), (KafkaProducerSettings, "OBSINGEST_KAFKA_")],
)
def test_brokers_come_from_the_unit_then_the_conventional_variable(
    monkeypatch: pytest.MonkeyPatch, cls: type, prefix: str
) -> None:
    assert cls().bootstrap_servers == defaults.KAFKA_BOOTSTRAP
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "conventional:1")
    assert cls().bootstrap_servers == "conventional:1"
    monkeypatch.setenv(f"{prefix}BOOTSTRAP_SERVERS", "own:1")
    assert cls().bootstrap_servers == "own:1"
    assert cls(bootstrap_servers="given:1").bootstrap_servers == "given:1"
    monkeypatch.setenv(f"{prefix}EXTRA", '{"security.protocol": "SASL_SSL"}')
    assert cls().extra == {"security.protocol": "SASL_SSL"}


@pytest.mark.parametrize(
    ("cls", "prefix"),
    [
        (StoreSettings, "OBSINGEST_STORE_"),
        (AssemblerSettings, "OBSINGEST_ASSEMBLER_"),
        (EdgeSettings, "OBSINGEST_EDGE_"),
    ],
)
def test_store_layout_is_read_under_each_units_prefix(
    monkeypatch: pytest.MonkeyPatch, cls: type, prefix: str
) -> None:
    assert (cls().prefix, cls().quarantine_prefix) == (defaults.RAW_PREFIX, defaults.QUARANTINE_PREFIX)
    monkeypatch.setenv(f"{prefix}PREFIX", "mine/")
    monkeypatch.setenv(f"{prefix}QUARANTINE_PREFIX", "parked/")
    assert (cls().prefix, cls().quarantine_prefix) == ("mine/", "parked/")
