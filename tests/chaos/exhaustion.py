"""Resources that run out, as chaos faults, and what each scenario asserts about them (issue 21):
every exhausted resource is an outage, never a verdict; the pipeline rides it out and ends with
everything delivered once, nothing quarantined for it, no manual step.

- ``StoreStorm``: the GCS emulator answers the edge 429 / 503 / quota-403 (an HTTP fault proxy,
  ``tests/integration/fixtures/http_fault.py``: toxiproxy works on bytes, not statuses).
- ``ConnectionHog``: every PostgreSQL connection slot taken (SQLSTATE 53300) while the register
  function is restarted and must connect again.
- ``StoreDiskFull``: the GCS emulator's directory of the bucket (a tmpfs of its own) filled: it
  answers 500 "no space left on device", which the edge reads as ``destination-full``.
- ``RegistryDiskFull``: the registry database's tablespace (its own small tmpfs) filled: inserts
  fail "could not extend file" (SQLSTATE 53100).
- ``BrokerDiskFull``: the Kafka broker's only log directory (a tmpfs of its own) filled: the
  append fails "No space left on device", the broker takes the directory offline and, as it was
  its only one (the KRaft metadata log's too), halts; freed, and the broker restarted by the
  harness standing for its process supervisor.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.faults import Fault
from tests.chaos.world import World


def fill(path: Path, chunk: int = 1 << 20) -> int:
    """Write zeros to ``path`` until its filesystem is full to the last byte (ENOSPC ends it:
    the free space ``statvfs`` reports is not quite what a file can take); bytes written."""
    written = 0
    with path.open("wb", buffering=0) as fh:
        while True:
            try:
                written += fh.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if chunk == 1:
                    return written
                chunk //= 2


def _sample_edge(world: World, samples: list[dict[str, Any]], stop: threading.Event) -> None:
    assert world.edge is not None
    while not stop.wait(1.0):
        health = world.edge.health()
        if health is not None:
            samples.append(health)


@dataclass
class StoreStorm(Fault):
    """The store answers every request of the edge with these statuses in turn."""

    statuses: tuple[int, ...] = (429, 503, 429, 403)
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def inject(self, world: World) -> None:
        assert world.store_fault is not None, "the world has no store fault proxy"
        world.store_fault.storm(list(self.statuses))
        threading.Thread(target=_sample_edge, args=(world, self.samples, self._stop), daemon=True).start()

    def heal(self, world: World) -> None:
        assert world.store_fault is not None
        world.store_fault.calm()
        self._stop.set()
        self.notes["faulted"] = dict(world.store_fault.faulted)


@dataclass
class ConnectionHog(Fault):
    """Every connection slot of PostgreSQL taken (as the superuser: the reserved ones too)
    for ``duration`` seconds; the register function SIGKILLed at once and restarted, so it must
    open new connections while none is left."""

    _conns: list[Any] = field(default_factory=list)

    def inject(self, world: World) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        assert world.function is not None
        world.function.stop(signal.SIGKILL)  # first: the slots its pool held are taken too
        url = make_url(world.admin_url).set(drivername="postgresql")
        dsn = url.render_as_string(hide_password=False)
        refusals = 0  # a slot the killed function's backends free a moment later is taken too
        while len(self._conns) < 1000 and refusals < 3:
            try:
                self._conns.append(psycopg.connect(dsn, connect_timeout=5))
                refusals = 0
            except psycopg.OperationalError as exc:
                self.notes["refused"] = " ".join(str(exc).split())[:200]
                refusals += 1
                time.sleep(0.5)
        self.notes["held"] = len(self._conns)
        world.function.start(timeout=90)

    def heal(self, world: World) -> None:
        for conn in self._conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._conns.clear()


@dataclass
class RegistryDiskFull(Fault):
    """The registry database's tablespace filled to the last byte for ``duration`` seconds."""

    def inject(self, world: World) -> None:
        assert world.registry_disk is not None, "the world's registry has no disk of its own"
        fill(world.registry_disk / "ballast")

    def heal(self, world: World) -> None:
        assert world.registry_disk is not None
        (world.registry_disk / "ballast").unlink()


@dataclass
class StoreDiskFull(Fault):
    """The store's own disk (the GCS emulator's directory of the bucket, a tmpfs of its own)
    filled to the last byte for ``duration`` seconds: it answers 500 "no space left on device",
    which the edge's store reads as ``destination-full``."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def inject(self, world: World) -> None:
        assert world.gcs_disk is not None, "the world's bucket has no disk of its own"
        ballast = world.gcs_disk / BALLAST
        ballast.parent.mkdir(exist_ok=True)
        fill(ballast)
        threading.Thread(target=_sample_edge, args=(world, self.samples, self._stop), daemon=True).start()

    def heal(self, world: World) -> None:
        assert world.gcs_disk is not None
        self._stop.set()
        (world.gcs_disk / BALLAST).unlink()


@dataclass
class BrokerDiskFull(Fault):
    """The Kafka broker's log directory filled to the last byte for ``duration`` seconds.

    Kafka 4.3.1 in KRaft mode, one log directory: the first append that fails for want of space
    (a chunk, an offset commit, a metadata record) answers KAFKA_STORAGE_ERROR, marks the
    directory offline and, as no directory is left (and the metadata log lives there too), the
    broker halts. Space returns as an operator's automation would bring it back: the filler is
    deleted, and the broker is started again if it halted (the harness standing for the process
    supervisor, a ``Restart=on-failure`` unit; nothing in the pipeline is touched by hand).
    While it is full a thread watches the broker: ``notes["halted_after"]`` is how long after
    the fill it went down (absent: it did not)."""

    _stop: threading.Event = field(default_factory=threading.Event)

    def inject(self, world: World) -> None:
        assert world.kafka_disk is not None, "the world's broker has no disk of its own"
        assert world.kafka_stack is not None
        broker = world.kafka_stack.stack.service("kafka")
        self.notes["log_offset"] = broker.log_path.stat().st_size
        self.notes["filled_bytes"] = fill(world.kafka_disk / KAFKA_BALLAST)
        threading.Thread(target=self._watch, args=(broker, time.monotonic()), daemon=True).start()

    def _watch(self, broker: Any, since: float) -> None:
        while not self._stop.wait(0.5):
            if not broker.running():
                self.notes["halted_after"] = round(time.monotonic() - since, 1)
                return

    def heal(self, world: World) -> None:
        assert world.kafka_disk is not None and world.kafka_stack is not None
        self._stop.set()
        (world.kafka_disk / KAFKA_BALLAST).unlink()
        broker = world.kafka_stack.stack.service("kafka")
        with broker.log_path.open("rb") as fh:  # what the broker said while its disk was full
            fh.seek(self.notes["log_offset"])
            said = fh.read().decode(errors="replace")
        self.notes["no_space"] = "No space left on device" in said
        self.notes["storage_error"] = "KafkaStorageException" in said
        self.notes["running_at_heal"] = broker.running()
        if not self.notes["running_at_heal"]:  # the supervisor's restart
            world.kafka_stack.start("kafka", timeout=180)
            self.notes["restarted"] = True


#: the filler in the broker's log directory: a plain file, which Kafka's log loading skips (a
#: directory there would be read as a partition's)
KAFKA_BALLAST = "chaos-ballast"

#: the filler in the bucket's directory: an object outside every prefix the pipeline reads
BALLAST = Path("ballast") / "fill"


# -- checks --------------------------------------------------------------------------------------
#: reasons no CCD may ever be quarantined for while a resource is exhausted
OUTAGE_REASONS = {
    "unexpected-error",
    "worker-crashed",
    "store-permission-denied",
    "store-request-refused",
    "retries-exhausted",
    "rate-limited",
    "quota-exceeded",
    "destination-full",
    "disk-full",
}


def _edge_retry_reasons(world: World) -> set[str]:
    assert world.edge is not None
    return {e.get("reason", "") for e in world.edge.events("edge.retry")}


def edge_rode_out_the_rate_limit(run: Any) -> None:
    """The storm was answered as what it is: the edge said rate-limited (or quota-exceeded) in
    its health while it lasted and retried with that reason; nothing was quarantined for it."""
    [storm] = run.fault_of(StoreStorm)
    assert storm.notes.get("faulted"), "the proxy answered nothing with an error"
    exhausted = {(h.get("destination") or {}).get("exhausted") for h in storm.samples}
    assert exhausted & {"rate-limited", "quota-exceeded"}, storm.samples[:3]
    reasons = _edge_retry_reasons(run.world)
    assert reasons & {"rate-limited", "quota-exceeded"}, reasons
    # bad input files are quarantined with their own reasons; nothing for the storm's sake
    wrong = {e.get("reason") for e in run.world.edge.events("edge.quarantined")} & OUTAGE_REASONS
    assert not wrong, f"quarantined for an outage: {wrong}"


def edge_rode_out_the_full_store(run: Any) -> None:
    """The store's full disk was answered as what it is: the edge said destination-full in its
    health and retried with that reason; nothing was quarantined for it."""
    [full] = run.fault_of(StoreDiskFull)
    exhausted = {(h.get("destination") or {}).get("exhausted") for h in full.samples}
    assert "destination-full" in exhausted, full.samples[:3]
    assert "destination-full" in _edge_retry_reasons(run.world)
    wrong = {e.get("reason") for e in run.world.edge.events("edge.quarantined")} & OUTAGE_REASONS
    assert not wrong, f"quarantined for an outage: {wrong}"


def _answered(run: Any, reason: str) -> bool:
    """The register function answered a delivery 503 with ``reason`` (the relay logs each
    nacked push with the function's answer: ``HTTP 503: retriable: <reason>: ...``)."""
    relay = run.world.logs / "relay.log"
    text = relay.read_text(errors="replace") if relay.exists() else ""
    return f"retriable: {reason}:" in text


def registry_rode_out_the_connection_slots(run: Any) -> None:
    """Every slot was really taken, and the register function answered connection-slots (503,
    redelivered) until they came back."""
    [hog] = run.fault_of(ConnectionHog)
    assert hog.notes.get("held", 0) > 0 and "refused" in hog.notes, hog.notes
    assert _answered(run, "connection-slots"), "the function never answered connection-slots"


def broker_rode_out_its_full_disk(run: Any) -> None:
    """The broker really ran out of disk (its log says "No space left on device" while full),
    every CCD's chunks were acknowledged by it in the end (the edge's journal: all acked), and
    the edge quarantined nothing for it."""
    [full] = run.fault_of(BrokerDiskFull)
    reasons = sorted(_edge_retry_reasons(run.world))
    run.note(f"broker disk full: {full.notes}; edge retry reasons {reasons}")
    assert full.notes.get("no_space"), f"the broker never ran out of disk: {full.notes}"
    from producers.edge.journal import Journal

    journal = Journal(run.world.spool)
    try:
        statuses = {i.status for i in journal.items() if i.key in run.sent}
    finally:
        journal.close()
    assert statuses == {"acked"}, statuses
    wrong = {e.get("reason") for e in run.world.edge.events("edge.quarantined")} & OUTAGE_REASONS
    assert not wrong, f"quarantined for an outage: {wrong}"


def registry_rode_out_its_full_disk(run: Any) -> None:
    """Inserts really failed for want of disk, the register function answered registry-full
    (503, redelivered) and registered everything once space was back."""
    assert _answered(run, "registry-full"), "the function never answered registry-full"
