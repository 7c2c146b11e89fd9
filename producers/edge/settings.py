"""Edge service settings (``OBSINGEST_EDGE_*``), read once at start-up; flags override them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from obsingest import defaults
from obsingest.settings import StoreLayout


class EdgeSettings(StoreLayout):
    """How the edge takes, keeps and sends CCDs. Defaults suit a summit node; tests shrink them."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_EDGE_", extra="ignore")

    #: file://DIR, gs://BUCKET[/PREFIX] or kafka://HOST:PORT/TOPIC
    destination: str = defaults.STORE_URL
    #: holds the journal (journal.sqlite3) and compressed copies of CCDs waiting to be sent
    spool: Path = Path("./edge-spool")
    #: the DAQ's hand-off directory; None: only the Python API feeds the service
    handoff: Path | None = None
    workers: int = Field(default=2, ge=1)
    #: compression threads per worker
    threads: int = Field(default=1, ge=1)
    #: "rename": a file is complete once it has its final name (the DAQ writes *.tmp, then
    #: renames); "settle": once its size and mtime have not changed for ``settle_seconds``
    complete: Literal["rename", "settle"] = "rename"
    settle_seconds: float = Field(default=2.0, ge=0)
    #: an in-progress file older than this is quarantined as never completed
    incomplete_timeout: float = Field(default=600.0, gt=0)
    #: full rescans of the hand-off directory (a safety net behind the watcher), seconds
    rescan_interval: float = Field(default=30.0, gt=0)
    #: what happens to a raw file in the hand-off directory once its CCD is acknowledged
    on_ack: Literal["keep", "delete", "move"] = "keep"
    #: target of on_ack=move (default: HANDOFF/done)
    done_dir: Path | None = None
    #: destination backoff: first wait, and the cap it doubles up to (seconds)
    retry_base_delay: float = Field(default=0.5, gt=0)
    retry_max_delay: float = Field(default=10.0, gt=0)
    #: a CCD whose worker died this many times is quarantined (reason worker-crashed)
    crash_limit: int = Field(default=2, ge=1)
    #: refuse new work when the spool filesystem has less free space than this (bytes)
    min_free_bytes: int = Field(default=512 * 1024 * 1024, ge=0)
    #: exit with code 75 after refusing new work this long (0: stay up, degraded, until space
    #: returns)
    max_refusing_seconds: float = Field(default=0.0, ge=0)
    #: acked journal rows older than this are purged at start-up (days)
    keep_days: float = Field(default=30.0, gt=0)
    #: readout -> acknowledged above this is reported (never dropped)
    budget_seconds: float = Field(default=defaults.BUDGET_SECONDS, gt=0)
    health_host: str = "127.0.0.1"
    #: HTTP health endpoint port; 0 picks a free one (written to SPOOL/health.port), -1 disables
    health_port: int = Field(default=8089, ge=-1)
