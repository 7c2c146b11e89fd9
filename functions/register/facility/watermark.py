"""The incremental reconcile's memory of one lane (an instrument prefix, ``listing.lanes``: names
sort by instrument first, so instruments do not share one): a watermark name to list from, moved up to the
lowest name still open (younger than ``lag``, or unsettled and younger than ``hold``), and the names
at or after it already settled. What falls below is left to the full-window sweep.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from obsingest.store.base import StoredObject


@dataclass
class PrefixTail:
    prefix: str
    #: objects created less than this many seconds ago keep the watermark below them
    lag: float = 120.0
    #: an unsettled object keeps the watermark below it for at most this many seconds
    hold: float = 1800.0
    #: list names >= start ("": from the beginning of the prefix)
    start: str = ""
    #: names >= start known to the registry (registered or quarantined) or out of the window
    settled: set[str] = field(default_factory=set)

    def unchecked(
        self, listed: Iterable[StoredObject], since: datetime, until: datetime
    ) -> list[StoredObject]:
        """What the registry must be asked about: not settled, created in [since, until)."""
        return [obj for obj in listed if obj.name not in self.settled and since <= obj.time_created < until]

    def advance(
        self, listed: Sequence[StoredObject], settled: Iterable[str], now: datetime, since: datetime
    ) -> str:
        """After a pass over ``listed`` (named ``>= start``) that settled ``settled``: move the
        watermark up to the lowest open name (never down) and return it."""
        self.settled.update(settled)
        recent = now - timedelta(seconds=self.lag)
        held = max(since, now - timedelta(seconds=self.hold))
        open_names = [
            obj.name
            for obj in listed
            if obj.time_created >= recent or (obj.name not in self.settled and obj.time_created >= held)
        ]
        # the lowest open name, else the last one listed (listed again next pass: one object)
        start = min(open_names) if open_names else max((obj.name for obj in listed), default=self.start)
        self.start = max(start, self.start)
        names = {obj.name for obj in listed}
        self.settled = {n for n in self.settled if n >= self.start and n in names}
        return self.start
