"""The relay's delivery policy mirrors a Pub/Sub push subscription's, within Pub/Sub's limits,
and its attempt counts survive a relay restart (Pub/Sub's ``delivery_attempt``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.local.provision import relay_delivery_policy
from infra.local.relay import Action, Delivery, PushResult, Relay, RelaySettings
from infra.local.relay.policy import backoff_seconds
from obsingest.settings import BusSettings

pytestmark = pytest.mark.unit


def test_defaults_ride_out_a_minute_long_outage_without_a_dead_letter():
    settings = RelaySettings()
    assert settings.max_attempts == 10
    # seconds from a message's first failed push to its last push
    window = sum(
        backoff_seconds(attempt, settings.min_backoff, settings.max_backoff)
        for attempt in range(1, settings.max_attempts)
    )
    assert window == 1 + 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60
    assert window > 3 * 60  # a minute-long outage costs nothing


@pytest.mark.parametrize(
    "fields",
    [
        {"max_attempts": 101},
        {"max_attempts": 0},
        {"min_backoff": 601},
        {"max_backoff": 601},
        {"min_backoff": -1},
        {"min_backoff": 10, "max_backoff": 5},
    ],
)
def test_settings_outside_pubsubs_limits_are_refused(fields):
    with pytest.raises(ValidationError):
        RelaySettings(**fields)


def test_the_subscription_policy_is_clamped_to_what_pubsub_accepts():
    bus = BusSettings(pubsub_project="p", objects_dlq_topic="dlq")
    fields = relay_delivery_policy(bus, RelaySettings())
    assert fields["dead_letter_policy"] == {
        "dead_letter_topic": "projects/p/topics/dlq",
        "max_delivery_attempts": 10,
    }
    assert fields["retry_policy"]["minimum_backoff"] == {"seconds": 1, "nanos": 0}
    assert fields["retry_policy"]["maximum_backoff"] == {"seconds": 60, "nanos": 0}
    fast = relay_delivery_policy(bus, RelaySettings(max_attempts=3, min_backoff=0.5, max_backoff=0.5))
    assert fast["dead_letter_policy"]["max_delivery_attempts"] == 5  # Pub/Sub's minimum
    assert fast["retry_policy"]["minimum_backoff"] == {"seconds": 0, "nanos": 500_000_000}
    assert fast["retry_policy"]["maximum_backoff"]["nanos"] == 500_000_000
    with pytest.raises(ValidationError):  # never below min
        RelaySettings(min_backoff=0.5, max_backoff=0.0)


class OneShot:
    def __init__(self) -> None:
        self.acked: list[str] = []
        self.nacked: list[tuple[str, int]] = []

    def pull(self, max_messages, timeout):
        return []

    def ack(self, ack_ids):
        self.acked += ack_ids

    def nack(self, ack_ids, delay_seconds):
        self.nacked += [(a, delay_seconds) for a in ack_ids]


class Failing:
    def push(self, envelope):
        return PushResult(503, "retriable: registry unavailable")


class Dlq:
    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []

    def publish(self, data, attributes):
        self.published.append(attributes)
        return "1"


def test_a_restarted_relay_continues_the_count_from_delivery_attempt():
    """Pushes 1-7 happened before the restart; the new relay has no memory of them."""
    settings = RelaySettings(max_attempts=10, min_backoff=1, max_backoff=60)
    source, dlq = OneShot(), Dlq()
    fresh = Relay(source, Failing(), dlq, settings, subscription_path="s")
    eighth = Delivery("ack-8", "m", b"{}", {}, None, delivery_attempt=8)
    assert fresh.handle(eighth) is Action.NACK
    assert source.nacked == [("ack-8", 60)]  # backoff of the 8th attempt, not the 1st
    tenth = Delivery("ack-10", "m", b"{}", {}, None, delivery_attempt=10)
    assert Relay(source, Failing(), dlq, settings, subscription_path="s").handle(tenth) is (
        Action.DEAD_LETTER
    )
    assert dlq.published[0]["dlq_attempts"] == "10"


def test_the_manifests_relay_dead_letters_to_its_own_topic():
    bus = BusSettings(pubsub_project="p")
    manifests = RelaySettings(dead_letter_topic=bus.exposures_dlq_topic)
    policy = relay_delivery_policy(bus, manifests)["dead_letter_policy"]
    assert policy["dead_letter_topic"] == "projects/p/topics/exposures-dlq"
    explicit = relay_delivery_policy(bus, RelaySettings(), "exposures-dlq")
    assert explicit["dead_letter_policy"]["dead_letter_topic"] == "projects/p/topics/exposures-dlq"
    default = relay_delivery_policy(bus, RelaySettings())["dead_letter_policy"]
    assert default["dead_letter_topic"].endswith("/ccd-objects-dlq")
