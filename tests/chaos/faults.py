"""The faults a scenario injects: each ``inject``-s at a (seeded) random moment and ``heal``-s after
its ``duration``, recording what it saw in ``notes`` for the scenario's checks.

Processes are SIGKILLed as a crash would take them (whole process group, no clean-up), services
are stopped, crashed or restarted on the suite's private instances, links are cut through
toxiproxy, and the spool's own small filesystem is filled.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.chaos import bad_input
from tests.chaos.world import World


@dataclass
class Fault:
    """Base: ``label`` names it in the report; ``duration`` is how long it lasts (0: instant)."""

    label: str
    duration: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    injected_at: float = 0.0
    healed_at: float = 0.0

    def inject(self, world: World) -> None:
        raise NotImplementedError

    def heal(self, world: World) -> None:
        """Undo the fault (restart, reconnect, free space); default: nothing to undo."""


@dataclass
class Kill(Fault):
    """SIGKILL of a long-running process; restarted ``duration`` seconds later (by hand, as a
    supervisor would)."""

    process: str = "edge"
    vanished: bad_input.BadInput | None = None

    def inject(self, world: World) -> None:
        if self.process == "edge":
            self.notes["journal_at_kill"] = _in_flight(world, within=IN_FLIGHT_WAIT)
        proc = world.process(self.process)
        if self.process == "function":
            proc.stop(signal.SIGKILL)
        else:
            proc.kill9()
        if self.vanished is not None:  # the edge is down: a CCD journalled, its file then gone
            bad_input.inject(world, self.vanished)

    def heal(self, world: World) -> None:
        proc = world.process(self.process)
        if self.process == "function":
            proc.start(timeout=90)
        elif self.process == "edge":  # the next fault may hit it while it starts and resumes
            proc.start(wait_ready=False)
        else:
            proc.start()


@dataclass
class Outage(Fault):
    """A process taken down cleanly (SIGTERM) for ``duration`` seconds: a redeploy, a crash
    loop, a function that is gone for a minute."""

    process: str = "function"

    def inject(self, world: World) -> None:
        proc = world.process(self.process)
        if self.process == "function":
            proc.stop()
        else:
            proc.terminate()
        # down from the moment the process has exited (a graceful stop lets requests in flight
        # finish, which takes seconds on a busy machine), not from when the stop was asked for
        self.notes["down_from"] = time.time()

    def heal(self, world: World) -> None:
        proc = world.process(self.process)
        # ... until its successor is started (it may serve before ``start`` sees the port open)
        self.notes["down_until"] = time.time()
        proc.start(timeout=90) if self.process == "function" else proc.start()


@dataclass
class ServiceDown(Fault):
    """A service of the private stack stopped for ``duration`` seconds (PostgreSQL: a clean
    shutdown; the registry is unreachable meanwhile)."""

    service: str = "postgres"

    def inject(self, world: World) -> None:
        world.stack.stop(self.service)

    def heal(self, world: World) -> None:
        world.stack.start(self.service)


@dataclass
class PostgresCrash(Fault):
    """``pg_ctl restart -m immediate``: no checkpoint, no flush, as a power cut leaves it."""

    def inject(self, world: World) -> None:
        before = world.stack.pid("postgres")
        self.notes["registered_before"] = world.read(world.registry.count_datasets)
        pid = world.stack.crash_restart_postgres()
        status = world.stack.stack.service("postgres").status()
        self.notes.update(
            old_pid=before, new_pid=pid, status_pid=status.pid, running=status.running, healthy=status.healthy
        )


@dataclass
class EmulatorRestart(Fault):
    """The GCS or Pub/Sub emulator restarted: notification configs (GCS) or every topic and
    subscription (Pub/Sub) forgotten. The Pub/Sub emulator also forgets the messages it accepted
    and nobody pulled yet, a loss real Pub/Sub never has (accepted is stored), and no publisher can
    see it. So the publishers are held (``World.publishers_held``) while the observers catch up and
    the emulator stops, and again while the observer subscribes after the restart."""

    service: str = "gcs"

    def inject(self, world: World) -> None:
        if self.service != "pubsub":
            world.stack.stop(self.service)
            world.stack.start(self.service)
            return
        assert world.observer is not None
        with world.publishers_held():
            for observer in (world.observer, world.ingested):
                if observer is not None:
                    observer.catch_up()
            world.stack.stop(self.service)
        world.stack.start(self.service)  # publishing meanwhile fails: the rows stay in the outbox
        with world.publishers_held():
            world.observer.resubscribe()


@dataclass
class BrokerKill(Fault):
    """SIGKILL of the Kafka broker; started again ``duration`` seconds later."""

    def inject(self, world: World) -> None:
        assert world.kafka_stack is not None
        world.kafka_stack.kill("kafka")

    def heal(self, world: World) -> None:
        assert world.kafka_stack is not None
        world.kafka_stack.start("kafka", timeout=120)


@dataclass
class TopicOutage(Fault):
    """The ``ccd-arrivals`` topic deleted for ``duration`` seconds. When it is back, the observer
    subscribes again (a deleted topic's subscriptions are detached for good), with the
    publishers held for that moment."""

    def inject(self, world: World) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        from obsingest.bus.pubsub import topic_path

        client = pubsub_v1.PublisherClient()
        try:
            client.delete_topic(request={"topic": topic_path(world.project, world.bus.arrivals_topic)})
        finally:
            client.stop()
        self.notes["registered_at_delete"] = world.read(world.registry.count_datasets)

    def heal(self, world: World) -> None:
        assert world.observer is not None
        # registered first: a registration between the two reads only adds to the outbox
        self.notes["registered_at_heal"] = world.read(world.registry.count_datasets)
        self.notes["outbox_at_heal"] = world.read(world.registry.outbox.status).pending
        with world.publishers_held():
            world.observer.resubscribe()


@dataclass
class NotificationsLost(Fault):
    """The bucket's notification configs deleted ("disabled for unknown reasons")."""

    def inject(self, world: World) -> None:
        bucket = world.store.client.bucket(world.bucket)
        deleted = 0
        for config in bucket.list_notifications():
            config.delete()
            deleted += 1
        self.notes["deleted_configs"] = deleted


@dataclass
class LinkFault(Fault):
    """A toxiproxy link cut for ``duration`` seconds: ``down`` (connections refused), ``reset``
    (every connection reset by peer), ``blackhole`` (data dropped, connections left hanging)."""

    link: str = "store"
    kind: str = "down"
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def proxy(self, world: World) -> Any:
        proxy = world.store_proxy if self.link == "store" else world.registry_proxy
        assert proxy is not None, f"no {self.link} link in this world"
        return proxy

    def inject(self, world: World) -> None:
        proxy = self.proxy(world)
        if self.kind == "down":
            proxy.disable()
        elif self.kind == "reset":
            proxy.add_toxic("chaos", "reset_peer", stream="upstream", timeout=0)
        else:
            proxy.add_toxic("chaos", "timeout", stream="upstream", timeout=0)
        if self.link == "store":  # the edge's health while the destination is away
            threading.Thread(target=self._sample, args=(world,), daemon=True).start()

    def _sample(self, world: World) -> None:
        assert world.edge is not None
        while not self._stop.wait(1.0):
            health = world.edge.health()
            if health is not None:
                self.samples.append(health)

    def heal(self, world: World) -> None:
        self._stop.set()
        proxy = self.proxy(world)
        if self.kind == "down":
            proxy.enable()
        else:
            proxy.remove_toxic("chaos")
        self.notes["degraded"] = [h for h in self.samples if h.get("status") == "degraded"]


@dataclass
class SpoolFull(Fault):
    """The spool's filesystem filled to below the edge's free-space floor for ``duration``
    seconds; the filler is deleted to heal."""

    leave: int = 512 * 1024
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def inject(self, world: World) -> None:
        st = os.statvfs(world.spool)
        free = st.f_bavail * st.f_frsize
        with (world.spool / "filler").open("wb") as fh:
            fh.write(b"\0" * max(0, free - self.leave))
        self.notes["journal_at_fill"] = _journal_counts(world)
        threading.Thread(target=self._sample, args=(world,), daemon=True).start()

    def _sample(self, world: World) -> None:
        from producers.edge.journal import Journal

        assert world.edge is not None
        while not self._stop.wait(1.0):
            health = world.edge.health()
            if health is not None:
                journal = Journal(world.spool)
                try:  # CCD rows only: a bad file's quarantine row is no CCD taken
                    ccds = sum(1 for i in journal.items() if not i.key.startswith("file:"))
                finally:
                    journal.close()
                self.samples.append({**health, "at": time.time(), "ccd_rows": ccds})

    def heal(self, world: World) -> None:
        self._stop.set()
        self.notes["journal_at_free"] = _journal_counts(world)
        (world.spool / "filler").unlink()


IN_FLIGHT_WAIT = 3.0
"""Seconds an edge kill waits for CCDs in flight, so it lands mid-flight: a faster edge finishes
a 10-CCD exposure well inside its 0.5 s, and a kill at a random moment can find nothing to
resume (CI saw all three kills of a run land between exposures)."""


def _in_flight(world: World, within: float) -> dict[str, int]:
    """The journal's counts as soon as a CCD is seen, compressed or sent (or after ``within``)."""
    from producers.edge.journal import Journal

    deadline = time.monotonic() + within
    journal = Journal(world.spool)
    try:
        while True:
            counts = journal.counts()
            if counts["seen"] + counts["compressed"] + counts["sent"] or time.monotonic() > deadline:
                return counts
            time.sleep(0.005)
    finally:
        journal.close()


def _journal_counts(world: World) -> dict[str, int]:
    from producers.edge.journal import Journal

    journal = Journal(world.spool)
    try:
        return journal.counts()
    finally:
        journal.close()


@dataclass
class Nested(Fault):
    """``inner`` injected ``offset`` seconds into ``outer`` (and healed after its own duration),
    e.g. the edge killed while its spool is full; ``duration`` is the outer one's."""

    outer: Fault | None = None
    inner: Fault | None = None
    offset: float = 0.0

    def inject(self, world: World) -> None:
        assert self.outer is not None and self.inner is not None
        self.outer.injected_at = time.time()
        self.outer.inject(world)
        time.sleep(self.offset)
        self.inner.injected_at = time.time()
        self.inner.inject(world)
        time.sleep(self.inner.duration)
        self.inner.heal(world)
        self.inner.healed_at = time.time()
        time.sleep(max(0.0, self.outer.duration - self.offset - self.inner.duration))

    def heal(self, world: World) -> None:
        assert self.outer is not None
        self.outer.heal(world)
        self.outer.healed_at = time.time()


@dataclass
class RedeliveryStorm(Fault):
    """For ``duration`` seconds, every raw object stored so far gets ``copies`` more finalize
    notifications, published together every ``every`` seconds (as at-least-once delivery does at
    its worst: the same CCD delivered again and again, many at once, while its first delivery may
    still be in flight). Each must end registered once; the repeats are duplicates. On a busy
    machine the first CCD may be stored late: the storm then goes on (at most 2 minutes more)
    until one round has found something to repeat."""

    copies: int = 3
    every: float = 2.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _stormed: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def inject(self, world: World) -> None:
        self.notes["published"] = 0
        self._thread = threading.Thread(
            target=self._storm, args=(world,), daemon=True, name="redelivery-storm"
        )
        self._thread.start()

    def heal(self, world: World) -> None:
        self._stormed.wait(timeout=120)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        assert self.notes["published"] > 0, "the storm published nothing"

    def _storm(self, world: World) -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

        from obsingest.bus.pubsub import topic_path
        from obsingest.store.notifications import gcs_notification_message

        topic = topic_path(world.project, world.bus.objects_topic)
        client = pubsub_v1.PublisherClient()
        try:
            while not self._stop.is_set():
                futures = []
                for blob in world.store.client.list_blobs(world.bucket, prefix="raw/"):
                    data, attributes = gcs_notification_message(world.store.stat(blob.name))
                    futures += [client.publish(topic, data, **attributes) for _ in range(self.copies)]
                for future in futures:
                    future.result(timeout=30)
                self.notes["published"] += len(futures)
                if futures:
                    self._stormed.set()
                self._stop.wait(self.every)
        except Exception as exc:  # reported by heal's assertion if nothing went out at all
            self.notes["error"] = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            client.stop()
