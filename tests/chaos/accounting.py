"""Counting a scenario's outcome from the outside: the registry's rows, the bucket's objects, the
edge's journal and the arrivals observer. Never from what a process says about itself.

Per CCD handed off (the DAQ's files): registered exactly once (one dataset row, its object in the
bucket with the row's size; on a Butler world one ``raw`` in the Butler itself, in any collection,
read with daf_butler's own API, its object in the bucket), announced (the observer received its
dataset id), acknowledged in the edge journal. Lost: handed off but not registered, or registered
but never announced. Doubled: a data id with two *different* dataset ids among the registry rows
and the announcements (an announcement repeated with the same dataset id is at-least-once
delivery, deduplicated by the subscriber, and counted apart as a duplicate announcement). Every
bad input must have its own quarantine record (registry or journal) with the reason it was sent for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.bad_input import BadInput, moved_to_quarantine
from tests.chaos.world import World


@dataclass
class Tally:
    sent: int = 0
    bad_sent: int = 0
    registered_once: int = 0
    stored: int = 0
    announced: int = 0
    acked: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    duplicate_announcements: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)  # bad inputs found, by reason
    unaccounted: list[str] = field(default_factory=list)  # bad inputs without their record
    unexpected_quarantine: list[str] = field(default_factory=list)
    unexpected_datasets: list[str] = field(default_factory=list)
    outbox_pending: int = 0
    journal: dict[str, int] = field(default_factory=dict)

    @property
    def settled(self) -> bool:
        """Everything sent has come out the other end, every bad input has its record."""
        return (
            self.registered_once == self.sent == self.announced == self.acked
            and not self.unaccounted
            and self.outbox_pending == 0
        )

    def progress(self) -> tuple[Any, ...]:
        """What changes while the pipeline still moves (compared for the quiet period)."""
        return (
            self.registered_once,
            self.announced,
            self.acked,
            self.duplicate_announcements,
            len(self.unaccounted),
            sum(self.quarantined.values()),
            len(self.unexpected_quarantine),
            self.outbox_pending,
        )

    def line(self) -> str:
        return (
            f"sent {self.sent} (+{self.bad_sent} bad), registered once "
            f"{self.registered_once}, announced {self.announced}, acked {self.acked}, lost "
            f"{len(self.lost)}, doubled {len(self.doubled)}, duplicate announcements "
            f"{self.duplicate_announcements}, bad accounted "
            f"{sum(self.quarantined.values())}/{self.bad_sent}, outbox "
            f"{self.outbox_pending}"
        )


def count(world: World, sent: set[str], bad: list[BadInput]) -> Tally:
    """Tally the world now. ``sent``: data id keys handed off; ``bad``: the bad inputs."""
    from producers.edge.journal import Journal

    tally = Tally(sent=len(sent), bad_sent=sum(1 for b in bad if b.sent))
    ids_by_key: dict[str, set[str]] = defaultdict(set)
    row_by_key: dict[str, dict[str, Any]] = {}
    if world.options.butler:  # the Butler is the registry of record: count what it holds
        for key, ds_id, uri in world.butler_datasets():
            ids_by_key[key].add(ds_id)
            row_by_key[key] = {"uri": uri, "size": None}  # the Butler keeps no size here
    else:
        for row in world.read(world.registry.datasets):
            key = f"{row['instrument']}/{row['exposure']}/{row['detector']:03d}"
            ids_by_key[key].add(str(row["id"]))
            row_by_key[key] = row
    objects = {
        blob.name: int(blob.size or 0) for blob in world.store.client.list_blobs(world.bucket, prefix="raw/")
    }
    assert world.observer is not None
    announcements = world.observer.announcements()
    announced_ids: dict[str, set[str]] = defaultdict(set)
    per_dataset: Counter[str] = Counter()
    for a in announcements:
        announced_ids[a.key].add(a.dataset_id)
        per_dataset[a.dataset_id] += 1
    tally.duplicate_announcements = sum(n - 1 for n in per_dataset.values())
    journal = Journal(world.spool)
    try:
        items = {item.key: item for item in journal.items()}
        tally.journal = journal.counts()
    finally:
        journal.close()
    for key in sorted(sent):
        ids = ids_by_key.get(key, set())
        row = row_by_key.get(key)
        in_bucket = row is not None and _object_of(row["uri"], world.bucket) in objects
        if in_bucket:
            assert row is not None  # in_bucket says so
            tally.stored += 1
            size = objects[_object_of(row["uri"], world.bucket)]
            in_bucket = row["size"] is None or size == int(row["size"])
        if len(ids) == 1 and in_bucket:
            tally.registered_once += 1
        if ids and ids & announced_ids.get(key, set()):
            tally.announced += 1
        item = items.get(key)
        if item is not None and item.state == "acked":
            tally.acked += 1
        if not ids or not (ids & announced_ids.get(key, set())):
            tally.lost.append(key)
        if len(ids | announced_ids.get(key, set())) > 1:
            tally.doubled.append(key)
    tally.unexpected_datasets = sorted(set(ids_by_key) - sent)
    tally.outbox_pending = world.read(world.registry.outbox.status).pending
    _bad(world, bad, items, tally)
    return tally


def _object_of(uri: str, bucket: str) -> str:
    prefix = f"gs://{bucket}/"
    return uri[len(prefix) :] if uri.startswith(prefix) else uri


def _bad(world: World, bad: list[BadInput], items: dict[str, Any], tally: Tally) -> None:
    records = world.read(world.registry.quarantined)
    used: set[int] = set()
    pubsub_fallback: list[BadInput] = []
    for item in (b for b in bad if b.sent and b.where == "registry"):
        found = None
        for i, rec in enumerate(records):
            if i in used or rec["reason"] != item.reason:
                continue
            uri = str(rec["object_uri"])
            if (item.marker and item.marker in uri) or (
                not item.marker and uri == f"pubsub:{item.message_id}"
            ):
                found = i
                break
        if found is None and not item.marker:
            pubsub_fallback.append(item)  # redriven: a copy with a new message id
            continue
        _found(item, found, used, tally)
    for item in pubsub_fallback:
        found = next(
            (
                i
                for i, rec in enumerate(records)
                if i not in used
                and rec["reason"] == item.reason
                and str(rec["object_uri"]).startswith("pubsub:")
            ),
            None,
        )
        _found(item, found, used, tally)
    tally.unexpected_quarantine = [
        f"{rec['reason']}: {str(rec['object_uri'])[:120]}" for i, rec in enumerate(records) if i not in used
    ]
    for item in (b for b in bad if b.sent and b.where == "edge"):
        entry = items.get(item.marker) or next(
            (e for k, e in items.items() if k.startswith("file:") and k.endswith(item.marker)), None
        )
        ok = (
            entry is not None
            and entry.state == "quarantined"
            and entry.reason == item.reason
            and all(fragment in (entry.error or "") for fragment in item.error_fragments)
            and (item.kind == "vanished" or moved_to_quarantine(world.handoff, item))
        )
        if ok:
            tally.quarantined[item.reason] += 1
        else:
            state = f"{entry.state}/{entry.reason}" if entry is not None else "not journalled"
            tally.unaccounted.append(f"edge {item.describe()}: {state}")
    for key, entry in items.items():  # a good CCD quarantined at the edge is a loss: say why
        if entry.state == "quarantined" and not any(
            key == b.marker or key.endswith(b.marker) for b in bad if b.where == "edge"
        ):
            tally.unexpected_quarantine.append(f"edge {key}: {entry.reason}: {entry.error}"[:200])


def _found(item: BadInput, index: int | None, used: set[int], tally: Tally) -> None:
    if index is None:
        tally.unaccounted.append(f"notification {item.describe()}: no quarantine record")
        return
    used.add(index)
    tally.quarantined[item.reason] += 1
