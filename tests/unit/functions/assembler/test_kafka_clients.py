"""The assembler's Kafka client configurations."""

from __future__ import annotations

import pytest

from functions.assembler.kafka_clients import consumer_config, dlq_producer_config
from functions.assembler.settings import AssemblerSettings

pytestmark = pytest.mark.unit


def test_the_dlq_producer_gets_the_extra_properties_the_consumer_gets():
    # on a secured cluster (OBSINGEST_ASSEMBLER_EXTRA='{"security.protocol": "SASL_SSL", ...}') the
    # consumer connected and the DLQ producer did not: every dead letter failed, the instance
    # stopped on the first poison record and every new instance again, its partition held for good
    extra = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    settings = AssemblerSettings(extra=extra)
    assert extra.items() <= consumer_config(settings).items()
    assert extra.items() <= dlq_producer_config(settings).items()
