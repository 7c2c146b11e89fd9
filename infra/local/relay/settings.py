"""``OBSINGEST_RELAY_*``: how the emulator push relay pulls, pushes and gives up.

The delivery policy is a Pub/Sub push subscription's with production's defaults
(``infra/terraform``): 10 attempts, backoff 1 s doubling to 60 s (243 s of redeliveries: a few
minutes' outage costs no dead letter). The relay accepts 1..100 attempts (Pub/Sub at least 5)
so a test can dead-letter fast; the relay then always gives up first.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults

#: Pub/Sub's own limits on a subscription's delivery policy
PUBSUB_MIN_DELIVERY_ATTEMPTS = 5
PUBSUB_MAX_DELIVERY_ATTEMPTS = 100
PUBSUB_MAX_BACKOFF_SECONDS = 600.0


class RelaySettings(BaseSettings):
    """Read at start-up; every field has an ``OBSINGEST_RELAY_<FIELD>`` variable."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_RELAY_", extra="ignore")

    subscription: str = defaults.RELAY_SUBSCRIPTION
    push_url: str = defaults.RELAY_PUSH_URL
    #: several instances of the function (``OBSINGEST_RELAY_PUSH_URLS='["http://a/", ...]'``),
    #: failing over at once (``spread.py``); empty: ``push_url`` alone
    push_urls: tuple[str, ...] = ()
    #: an instance that did not answer is passed over this long (doubling, at most the max)
    failover_cooldown: float = Field(default=0.5, ge=0)
    failover_max_cooldown: float = Field(default=2.0, ge=0)
    #: where given-up messages go (empty: the bus's objects dead-letter topic)
    dead_letter_topic: str = ""
    #: pushes of one message before it is dead-lettered (Pub/Sub: max_delivery_attempts)
    max_attempts: int = Field(default=defaults.RELAY_MAX_ATTEMPTS, ge=1, le=PUBSUB_MAX_DELIVERY_ATTEMPTS)
    #: nack backoff: redelivery after min(max, min * 2**(attempt-1)) seconds (Pub/Sub: retry_policy)
    min_backoff: float = Field(default=1.0, ge=0, le=PUBSUB_MAX_BACKOFF_SECONDS)
    max_backoff: float = Field(default=60.0, ge=0, le=PUBSUB_MAX_BACKOFF_SECONDS)
    concurrency: int = Field(default=defaults.RELAY_CONCURRENCY, ge=1)
    max_messages: int = Field(default=32, ge=1)
    #: an ack waits up to this long to share one acknowledge call with others; 0: each at once
    ack_linger: float = Field(default=0.02, ge=0, le=1.0)
    push_timeout: float = Field(default=30.0, gt=0)
    #: OIDC: sign pushes with an ID token for this audience (empty: no Authorization header)
    oidc_audience: str = ""

    @model_validator(mode="after")
    def _backoff_range(self) -> Self:
        if self.max_backoff < self.min_backoff:
            raise ValueError(
                f"OBSINGEST_RELAY_MAX_BACKOFF ({self.max_backoff}) is below "
                f"OBSINGEST_RELAY_MIN_BACKOFF ({self.min_backoff})"
            )
        return self

    def urls(self) -> list[str]:
        """Where the relay pushes: ``push_urls`` if given, else ``push_url``."""
        return list(self.push_urls) or [self.push_url]
