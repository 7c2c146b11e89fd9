"""``OBSINGEST_PRESENCE_*``: where the presence API listens and how much it answers at once (the
registry and budget come from the pipeline's own settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PresenceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSINGEST_PRESENCE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    #: exposures per night page unless the caller asks for fewer or more, and the most it may
    page_size: int = Field(default=50, ge=1)
    max_page_size: int = Field(default=500, ge=1)
    #: exposure answers kept (each is validated against the registry on every use; ~1 KiB each)
    cache_exposures: int = Field(default=20_000, ge=0)
    #: uvicorn workers sharing the port, each with its own cache and /metrics
    workers: int = Field(default=1, ge=1)
    #: one log line per request (off: at hundreds of requests/s the log is the cost)
    access_log: bool = False
