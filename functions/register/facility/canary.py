"""The canary: a tiny object under ``canary/`` every ``every`` seconds; one unseen after
``timeout``, with no later one seen, means notifications stopped when it was written.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow
from obsingest.metrics import Metrics, private_metrics
from obsingest.registry.audit import RegistryAudit
from obsingest.store.base import ObjectStore

log = get_logger("obsingest.canary")

#: canary rows older than this are purged
KEEP = timedelta(days=1)
CANARY_METADATA_KEY = "obsingest-canary-written"


@dataclass(frozen=True)
class CanaryState:
    healthy: bool
    #: when the first canary that never came back was written (the outage's start), if broken
    broken_since: datetime | None
    last_written: datetime | None
    last_seen: datetime | None
    #: canaries overdue and not seen within the lookback (broken or blips)
    overdue: int

    def seen_age(self, now: datetime) -> float | None:
        return (now - self.last_seen).total_seconds() if self.last_seen else None


@dataclass
class CanaryWatch:
    store: ObjectStore
    audit: RegistryAudit
    prefix: str
    every: float = 30.0
    timeout: float = 60.0
    clock: Callable[[], datetime] = utcnow
    metrics: Metrics = field(default_factory=private_metrics)
    _last_written: datetime | None = None
    _mine: list[str] | None = None

    def tick(self) -> CanaryState:
        """Write a canary when due, then judge from the registry's canary log."""
        now = self.clock()
        if self._last_written is None or now - self._last_written >= timedelta(seconds=self.every):
            self._write(now)
        state = self.state(now)
        self._tidy(now)
        return state

    def _write(self, now: datetime) -> None:
        name = f"{self.prefix}{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"
        self._last_written = now  # a failed write too: try again at the next interval, not every pass
        try:
            # the row first: the sighting can then never arrive before its canary is known
            self.audit.canary_written(name, now)
            self.store.put(
                name, f"obsingest canary {now.isoformat()}\n".encode(), {CANARY_METADATA_KEY: now.isoformat()}
            )
        except Exception as exc:  # the store or registry is down: judged by older canaries
            self.metrics.add("reconcile", "canary_write_failures")
            log_event(log, "canary.write_failed", logging.WARNING, canary=name, error=str(exc))
            return
        if self._mine is not None:
            self._mine.append(name)
        self.metrics.canary("written")
        log_event(log, "canary.written", logging.DEBUG, canary=name)

    def state(self, now: datetime | None = None) -> CanaryState:
        """Healthy unless the newest canary old enough to be judged never came back."""
        now = now or self.clock()
        lookback = max(timedelta(seconds=self.timeout * 20), timedelta(hours=1))
        rows = self.audit.canaries(since=now - lookback)
        cutoff = now - timedelta(seconds=self.timeout)
        seen = [r for r in rows if r.seen_at is not None and r.written_at is not None]
        last_seen = max((r.seen_at for r in seen), default=None)  # type: ignore[type-var]
        newest_back = max((r.written_at for r in seen), default=None)  # type: ignore[type-var]
        overdue = [r for r in rows if r.seen_at is None and r.written_at and r.written_at <= cutoff]
        # overdue and written after the newest canary that came back: notifications stopped
        stopped = [r for r in overdue if not newest_back or r.written_at > newest_back]  # type: ignore[operator]
        broken_since = min((r.written_at for r in stopped), default=None)  # type: ignore[type-var]
        last_written = max((r.written_at for r in rows if r.written_at), default=None)
        return CanaryState(not stopped, broken_since, last_written, last_seen, len(overdue))

    def _tidy(self, now: datetime) -> None:
        """Delete this watch's canary objects once seen (or their rows purged); purge old rows
        (best effort). The first pass adopts what a crashed predecessor under this prefix left:
        the canaries not seen yet and those of its last intervals (seen, perhaps not deleted)."""
        try:
            rows = {r.name: r for r in self.audit.canaries(since=now - KEEP)}
            if self._mine is None:
                ours = {
                    r.name: (r.written_at, r.seen_at)
                    for r in rows.values()
                    if r.name.startswith(self.prefix) and r.written_at is not None
                }
                # the predecessor's newest (not the one this watch has just written)
                mine = self._last_written or now
                newest = max((at for at, _ in ours.values() if at < mine), default=now)
                recent = newest - timedelta(seconds=2 * (self.every + self.timeout))
                self._mine = [name for name, (at, seen) in ours.items() if seen is None or at >= recent]
            delete = getattr(self.store, "delete", None)
            for name in list(self._mine):
                row = rows.get(name)
                if row is None or row.seen_at is not None:
                    try:
                        if delete is not None:
                            delete(name)  # idempotent: an adopted one may be gone already
                    except Exception as exc:  # the store's own errors: this one next pass
                        log_event(log, "canary.delete_failed", logging.WARNING, canary=name, error=str(exc))
                        continue
                    self._mine.remove(name)
            self.audit.purge_canaries(KEEP, now)
        except Exception as exc:  # the store's delete raises its library's own errors
            log_event(log, "canary.tidy_failed", logging.WARNING, error=str(exc))
