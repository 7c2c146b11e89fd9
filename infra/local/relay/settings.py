"""``OBSINGEST_RELAY_*``: how the emulator push relay pulls, pushes and gives up."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults


class RelaySettings(BaseSettings):
    """Read at start-up; every field has an ``OBSINGEST_RELAY_<FIELD>`` variable."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_RELAY_", extra="ignore")

    subscription: str = defaults.RELAY_SUBSCRIPTION
    push_url: str = "http://127.0.0.1:8080/"
    #: attempts (pushes) before a message is dead-lettered
    max_attempts: int = Field(default=5, ge=1)
    #: nack backoff: the message is redelivered after min(max, min * 2**(attempt-1)) seconds
    min_backoff: float = Field(default=1.0, ge=0)
    max_backoff: float = Field(default=60.0, ge=0)
    #: pushes in flight at once
    concurrency: int = Field(default=8, ge=1)
    max_messages: int = Field(default=32, ge=1)
    push_timeout: float = Field(default=30.0, gt=0)
    #: OIDC: sign pushes with an ID token for this audience (empty: no Authorization header)
    oidc_audience: str = ""
