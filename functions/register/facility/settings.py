"""``OBSINGEST_RECONCILE_*`` and ``OBSINGEST_REDRIVE_*``. The defaults register every CCD a
notification outage lost within 2 minutes of its end (a pass every 30 s, 15 s grace, a canary
every 30 s unseen after 60 s).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults


class ReconcileSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSINGEST_RECONCILE_", extra="ignore")

    #: seconds between passes of the service (``obsingest reconcile --every``)
    every: float = Field(default=30.0, gt=0)
    #: prefixes listed (raw CCDs and producer-parked bytes: both carry notifications)
    prefixes: tuple[str, ...] = (defaults.RAW_PREFIX, defaults.QUARANTINE_PREFIX)
    #: seconds back that objects are compared (an outage the canary sees widens it to its start)
    window: float = Field(default=6 * 3600.0, gt=0)
    #: objects younger than this are left to their notification (seconds)
    grace: float = Field(default=15.0, ge=0)
    #: seconds between full-window sweeps (the passes between list from each prefix's watermark)
    full_every: float = Field(default=1800.0, gt=0)
    #: the watermarks' ``lag`` and ``hold`` (seconds, ``facility/watermark.py``)
    lag: float = Field(default=120.0, ge=0)
    hold: float = Field(default=1800.0, ge=0)
    #: canary: write one every ``canary_every`` s; not seen after ``canary_timeout`` s = broken
    canary: bool = True
    canary_prefix: str = defaults.CANARY_PREFIX
    canary_every: float = Field(default=30.0, gt=0)
    canary_timeout: float = Field(default=60.0, gt=0)
    #: at most one repair (re-provisioning) per this many seconds while broken
    repair_every: float = Field(default=60.0, gt=0)
    #: outbox rows published per pass at most; published rows kept this many days
    drain_limit: int = Field(default=1000, ge=1)
    outbox_retention_days: float = Field(default=7.0, gt=0)
    #: the exposures sweep: incomplete ``budget + exposure_grace`` s after shutter close, counted once
    exposures: bool = True
    exposure_grace: float = Field(default=defaults.EXPOSURE_DEADLINE_GRACE_SECONDS, ge=0)


class RedriveSettings(BaseSettings):
    """``facility/redrive.py``: the defaults ride out an outage of about half an hour."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_REDRIVE_", extra="ignore")

    enabled: bool = True
    max_redrives: int = Field(default=5, ge=0)
    first_delay: float = Field(default=30.0, ge=0)
    max_delay: float = Field(default=1800.0, ge=0)
    #: letters looked at per pass at most
    max_per_pass: int = Field(default=1000, ge=1)
    #: the subscription keeping dead letters; empty: ``<objects dlq topic>-hold``
    subscription: str = ""
    #: where letters given up on are parked; empty: ``<objects dlq topic>-parked``
    parked_topic: str = ""

    def delay(self, redrives: int) -> float:
        """Seconds after its latest dead-lettering a letter redriven ``redrives`` times is due."""
        return min(self.max_delay, self.first_delay * 2**redrives)
