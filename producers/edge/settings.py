"""Edge service settings (``OBSINGEST_EDGE_*``), read once at start-up; the flags that override
them (``main``) say what each is."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from obsingest import defaults
from obsingest.settings import StoreLayout


class EdgeSettings(StoreLayout):
    """How the edge takes, keeps and sends CCDs. Defaults suit a summit node; tests shrink them."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_EDGE_", extra="ignore")

    destination: str = defaults.STORE_URL
    spool: Path = Path("./edge-spool")
    handoff: Path | None = None
    workers: int = Field(default=2, ge=1)
    threads: int = Field(default=1, ge=1)
    complete: Literal["rename", "settle"] = "rename"
    settle_seconds: float = Field(default=2.0, ge=0)
    incomplete_timeout: float = Field(default=600.0, gt=0)
    rescan_interval: float = Field(default=30.0, gt=0)
    on_ack: Literal["keep", "delete", "move"] = "keep"
    done_dir: Path | None = None
    #: destination backoff: first wait, and the cap it doubles up to (seconds)
    retry_base_delay: float = Field(default=0.5, gt=0)
    retry_max_delay: float = Field(default=10.0, gt=0)
    #: a CCD whose worker died this many times is quarantined (reason worker-crashed)
    crash_limit: int = Field(default=2, ge=1)
    min_free_bytes: int = Field(default=512 * 1024 * 1024, ge=0)  # --min-free-mb in bytes
    max_refusing_seconds: float = Field(default=0.0, ge=0)
    #: acked journal rows older than this are purged at start-up (days)
    keep_days: float = Field(default=30.0, gt=0)
    budget_seconds: float = Field(default=defaults.BUDGET_SECONDS, gt=0)
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=8089, ge=-1)

    @model_validator(mode="after")
    def _done_dir_not_watched(self) -> EdgeSettings:
        """A --done-dir inside the hand-off directory is watched: each file moved there was found
        again, a second file of a CCD whose first is gone, and quarantined as a checksum conflict.
        HANDOFF/done (the default; ``handoff.DONE_DIR``) is the edge's own, never watched."""
        if self.on_ack == "move" and self.handoff is not None and self.done_dir is not None:
            handoff, done = self.handoff.resolve(), self.done_dir.resolve()
            if done.is_relative_to(handoff) and done.relative_to(handoff).parts[:1] != ("done",):
                raise ValueError(
                    f"--done-dir {done} is inside the hand-off directory {handoff}, which the edge "
                    f"watches: use {handoff / 'done'} (the default) or a directory outside it"
                )
        return self
