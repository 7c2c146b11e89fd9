"""Bad input mixed into a scenario's traffic, each with the reason it must be quarantined for.

Two places take bad input, and each keeps its own record of why it refused something:
- **notifications** published to the objects topic (what a broken notifier, a foreign bucket or
  a hand-made message looks like): the register function quarantines each in the registry with
  its reason (``pubsub:<message id>`` for a message that is no notification at all, else the
  object's URI);
- **files** in the edge's hand-off directory (truncated, not FITS, no identity in the header,
  never completed, journalled and then gone): the edge journals each as ``quarantined`` with its
  reason and moves it to ``HANDOFF/quarantine/`` with a ``.reason.json``.

Every input carries a nonce (in its object name, exposure number, bucket or file name), so its
record is found by what was sent, never by trusting a count.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.chaos.world import DAY_OBS, INSTRUMENT, World

log = logging.getLogger("obsingest.chaos.bad_input")

#: sequence numbers of bad inputs' exposures: far from the night's own
BAD_SEQ = 90_000


@dataclass
class BadInput:
    kind: str
    reason: str  # the reason it must be quarantined with
    where: str  # "registry" | "edge"
    marker: str  # found in the record: the URI (registry) or the journal key / file name (edge)
    error_fragments: tuple[str, ...] = ()  # edge: words the quarantine's error text must hold
    payload: Any = None
    message_id: str = ""
    sent: bool = False
    note: str = ""

    def describe(self) -> str:
        return f"{self.kind} (expect {self.reason})"


# notifications -----------------------------------------------------------------------------------
def _resource(bucket: str, name: str, **over: Any) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    base = {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "generation": "1",
        "metageneration": "1",
        "size": "1000",
        "crc32c": "AAAAAA==",
        "md5Hash": "",
        "timeCreated": now,
        "updated": now,
        "metadata": {},
    }
    return {**base, **over}


def _attrs(event_type: str = "OBJECT_FINALIZE") -> dict[str, str]:
    return {"eventType": event_type, "payloadFormat": "JSON_API_V1"}


def notification(kind: str, bucket: str, n: int) -> BadInput:
    """One bad notification of ``kind``; ``n`` makes it unique within the scenario."""
    nonce = f"{uuid.uuid4().hex[:10]}"
    exposure = DAY_OBS * 100_000 + BAD_SEQ + n
    raw = f"raw/{INSTRUMENT}/{DAY_OBS}/{exposure}/{INSTRUMENT}_{exposure}_001.fits.fz"
    if kind == "not-json":
        return BadInput(kind, "bad-message", "registry", "", payload=(f"not json {nonce}".encode(), _attrs()))
    if kind == "json-array":
        return BadInput(
            kind, "bad-message", "registry", "", payload=(json.dumps([1, 2, nonce]).encode(), _attrs())
        )
    if kind == "wrong-type":
        body = _resource(bucket, raw, size=[1])
        return BadInput(kind, "bad-message", "registry", "", payload=(json.dumps(body).encode(), _attrs()))
    if kind == "no-event-type":
        body = _resource(bucket, raw)
        return BadInput(
            kind,
            "bad-message",
            "registry",
            "",
            payload=(json.dumps(body).encode(), {"payloadFormat": "JSON_API_V1"}),
        )
    names = {
        "outside-prefix": ("bad-object-name", f"elsewhere/{nonce}.txt"),
        "path-traversal": ("bad-object-name", f"raw/../{nonce}/x.fits.fz"),
        "nul-in-name": ("bad-object-name", f"raw/{nonce}\x00.fits.fz"),
        "unknown-instrument": (
            "unknown-instrument",
            raw.replace(INSTRUMENT, "Nonesuch").replace("_001.", f"_{n:03d}."),
        ),
        "missing-object": ("object-missing", raw),
        "producer-parked": ("quarantined-by-producer", f"quarantine/{nonce}.fits.fz"),
    }
    if kind in names:
        reason, name = names[kind]
        marker = name.split("\x00")[0] if "\x00" in name else name
        return BadInput(
            kind, reason, "registry", marker, payload=(json.dumps(_resource(bucket, name)).encode(), _attrs())
        )
    if kind == "foreign-bucket":
        other = f"someone-elses-{nonce}"
        return BadInput(
            kind,
            "foreign-bucket",
            "registry",
            other,
            payload=(json.dumps(_resource(other, raw)).encode(), _attrs()),
        )
    raise ValueError(f"unknown bad notification kind {kind!r}")


NOTIFICATION_KINDS = (
    "not-json",
    "json-array",
    "wrong-type",
    "no-event-type",
    "outside-prefix",
    "path-traversal",
    "nul-in-name",
    "unknown-instrument",
    "missing-object",
    "producer-parked",
    "foreign-bucket",
)


def publish(world: World, item: BadInput, patience: float = 90.0) -> None:
    """Publish to the objects topic (retried while the emulator is away); records the id.

    Only once the relay's subscription exists: a restarted emulator's topic is re-created before
    its subscription, and a message published in between reaches no subscriber (Pub/Sub's rule),
    so the notification would never be refused where the test looks for it."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    from obsingest import defaults
    from obsingest.bus.pubsub import topic_path
    from obsingest.bus.pull import subscription_path

    data, attributes = item.payload
    topic = topic_path(world.project, world.bus.objects_topic)
    subscription = subscription_path(world.project, defaults.RELAY_SUBSCRIPTION)
    deadline = time.monotonic() + patience
    client = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        while True:
            try:
                subscriber.get_subscription(request={"subscription": subscription}, timeout=10)
                item.message_id = client.publish(topic, data, **attributes).result(timeout=10)
                item.sent = True
                return
            except Exception as exc:  # topic gone with a restarted emulator: until repaired
                if time.monotonic() > deadline:
                    item.note = f"never published: {type(exc).__name__}: {exc}"[:200]
                    log.warning("bad notification %s not published: %s", item.kind, exc)
                    return
                time.sleep(1.0)
    finally:
        client.stop()
        subscriber.close()


# files at the edge -------------------------------------------------------------------------------
FILE_KINDS = ("truncated", "not-fits", "no-identity", "never-completed")


def _raw(exposure: int, detector: int) -> bytes:
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    spec = CcdSpec(INSTRUMENT, exposure, detector, DAY_OBS, datetime.now(UTC), 15.0, "r", "small")
    return generate_raw_ccd(spec)


def edge_file(kind: str, n: int) -> BadInput:
    """One bad hand-off file of ``kind``, under the camera's file name of a CCD of its own (or,
    for ``no-identity``, any name: the header is what is wrong)."""
    from obsingest.dataid import DataId

    exposure = DAY_OBS * 100_000 + BAD_SEQ + 500 + n
    data_id = DataId(INSTRUMENT, exposure, n % 9)
    ccd = data_id.identity().file_name
    if kind == "truncated":  # complete hand-off, bytes stop half-way (source died mid-file)
        return BadInput(kind, "corrupt-file", "edge", data_id.key, ("truncated", ccd), payload=ccd)
    if kind == "not-fits":  # refused when its header is read, before it is journalled as a CCD
        return BadInput(kind, "corrupt-file", "edge", ccd, ("not a FITS file",), payload=ccd)
    if kind == "no-identity":  # any name is fine; a header that cannot say which CCD is not
        name = f"flat_r_{exposure}.fits"
        return BadInput(kind, "no-identity", "edge", name, ("RAFTBAY",), payload=name)
    if kind == "never-completed":  # the writer died before its rename
        name = f".{ccd}.{uuid.uuid4().hex[:6]}.tmp"
        return BadInput(kind, "never-completed", "edge", name, payload=name)
    if kind == "vanished":  # journalled by an edge that then died; gone when it resumes
        return BadInput(kind, "source-vanished", "edge", data_id.key, ("vanished",), payload=ccd)
    raise ValueError(f"unknown bad file kind {kind!r}")


def write_file(world: World, item: BadInput) -> None:
    from obsingest.fileio import write_atomic

    exposure = DAY_OBS * 100_000 + BAD_SEQ + 500
    target = world.handoff / "bad" / str(item.payload)
    target.parent.mkdir(parents=True, exist_ok=True)
    if item.kind == "truncated":
        _instrument, key_exposure, detector = item.marker.split("/")
        data = _raw(int(key_exposure), int(detector))
        write_atomic(target, data[: len(data) // 2])
    elif item.kind == "not-fits":
        write_atomic(target, b"this is not a FITS file\n" * 2000)
    elif item.kind == "no-identity":
        data = _raw(exposure, 1)  # the raft card renamed: no detector
        write_atomic(target, data.replace(b"RAFTBAY = ", b"RAFTBAX = ", 1))
    elif item.kind == "never-completed":
        target.write_bytes(_raw(exposure, 2)[:5000])
    item.sent = True


def journal_vanished(world: World, item: BadInput) -> None:
    """While the edge is down: journal a CCD whose file is then gone (deleted before read)."""
    from obsingest.fileio import write_atomic
    from producers.edge.journal import Entry, Journal

    exposure, detector = int(item.marker.split("/")[1]), int(item.marker.split("/")[2])
    path = world.handoff / "bad" / str(item.payload)
    write_atomic(path, _raw(exposure, detector))
    journal = Journal(world.spool)
    try:
        journal.add(Entry(key=item.marker, source=str(path), priority=exposure, readout=time.time()))
    finally:
        journal.close()
    path.unlink()
    item.sent = True


def inject(world: World, item: BadInput) -> None:
    if item.where == "registry":
        publish(world, item)
    elif item.kind == "vanished":
        journal_vanished(world, item)
    else:
        write_file(world, item)


def draw(rng: random.Random, bucket: str, notifications: int, files: int) -> list[BadInput]:
    """``notifications`` bad notifications and ``files`` bad files, kinds drawn by ``rng``
    (every kind once before any repeats)."""
    out: list[BadInput] = []
    kinds = list(NOTIFICATION_KINDS)
    rng.shuffle(kinds)
    for n in range(notifications):
        out.append(notification(kinds[n % len(kinds)], bucket, n))
    kinds = list(FILE_KINDS)
    rng.shuffle(kinds)
    for n in range(files):
        out.append(edge_file(kinds[n % len(kinds)], n))
    return out


def moved_to_quarantine(handoff: Path, item: BadInput) -> bool:
    """The edge moved the bad file aside, with its reason beside it."""
    name = str(item.payload)
    moved = {p.name for p in (handoff / "quarantine").rglob("*") if p.is_file()}
    return name in moved and f"{name}.reason.json" in moved
