"""When the edge refuses new work (spool below its free-space floor, or a journal write failed),
and saying so loudly: an error log line (repeated every 10 s), a reason for the health endpoint,
and since when (for the exit-code policy). Resuming needs the floor cleared *and* a journal write.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from obsingest.logs import get_logger, log_event

log = get_logger("obsingest.edge")

REPEAT_LOG_SECONDS = 10.0


class Refusal:
    def __init__(self, spool: Path, min_free_bytes: int) -> None:
        self.spool = spool
        self.min_free_bytes = min_free_bytes
        self.reason: str | None = None
        self.since = 0.0
        self._last_log = 0.0

    @property
    def refusing(self) -> bool:
        return self.reason is not None

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.spool).free

    def space_ok(self) -> bool:
        """False (and refusing) below the floor; True only when not refusing at all."""
        try:
            free = self.free_bytes()
        except OSError as exc:
            self.refuse("spool-unavailable", f"spool {self.spool}: {exc}")
            return False
        if free < self.min_free_bytes:
            self.refuse(
                "spool-full",
                f"spool {self.spool}: {free:,} bytes free, below the {self.min_free_bytes:,}-byte floor",
            )
            return False
        return self.reason is None

    def refuse(self, reason: str, message: str) -> None:
        now = time.monotonic()
        if self.reason is None:
            self.since = self._last_log = now
            log_event(log, "edge.refusing_new_work", logging.ERROR, reason=reason, error=message)
        elif now - self._last_log > REPEAT_LOG_SECONDS:
            self._last_log = now
            log_event(
                log,
                "edge.still_refusing",
                logging.ERROR,
                reason=reason,
                error=message,
                seconds=round(now - self.since, 1),
            )
        self.reason = f"{reason}: {message}"

    def can_resume(self) -> bool:
        try:
            return self.free_bytes() >= self.min_free_bytes
        except OSError:
            return False

    def resumed(self) -> None:
        log_event(log, "edge.resumed_new_work", after_s=round(time.monotonic() - self.since, 1))
        self.reason = None

    def refusing_for(self) -> float:
        return time.monotonic() - self.since if self.reason is not None else 0.0
