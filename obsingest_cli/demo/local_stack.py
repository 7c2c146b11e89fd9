"""The demo on the real local stack: GCS emulator -> notifications -> relay -> register
function -> PostgreSQL registry -> ArrivalEvents on Pub/Sub.

Each run has its own bucket, project and database, kept for inspection unless ``keep=False``.
The relays deliver in-process to ``on_push`` and ``on_manifest``; ExposureIngested events go to
``<workdir>/exposures-ingested.jsonl``. Notifications cover the whole bucket (production:
``raw/`` and ``quarantine/``), so ``--inject-bad``'s stray object shows the function refuses it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from infra.local import provision
from obsingest.errors import ServiceUnavailable
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureIngested, ExposureManifest
from obsingest.registry import open_registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store import open_store
from obsingest.store.base import StoredObject
from obsingest.store.notifications import gcs_notification_message
from obsingest_cli.demo.environment import ArrivalCallback, ManifestCallback

log = get_logger("obsingest.demo.local")

STACK_SERVICES = ("pubsub", "gcs", "postgres")
#: the pull subscription the manifests relay delivers to ``on_manifest``
MANIFESTS_SUBSCRIPTION = "exposures-register"
#: what the demo's subscriber on ``exposures-ingested`` received
INGESTED_FILE = "exposures-ingested.jsonl"


class StackNotRunning(ServiceUnavailable):
    """The local stack is not up: the demo cannot run on it (one line, exit 1: no traceback)."""


def use_stack_environment(services: tuple[str, ...] = STACK_SERVICES, check: bool = True) -> dict[str, str]:
    """Export the local stack's endpoints into os.environ (variables already set win) and return
    the stack's own (so a caller can fall back to them); ``check``: StackNotRunning naming what
    is down."""
    from infra.local.stack import Stack

    stack = Stack(only=list(services))
    down = [svc.name for svc in stack.services if check and not svc.healthy()]
    if down:
        raise StackNotRunning(
            f"local stack service(s) not answering: {', '.join(down)}. "
            "Start the stack first: `obsingest stack up`"
        )
    env = stack.env()
    for key, value in env.items():
        os.environ.setdefault(key, value)
    return env


class LocalStackEnvironment:
    def __init__(self, workdir: Path, *, keep: bool = True) -> None:
        from obsingest.bus.pubsub import PubSubPublisher
        from obsingest.store.gcs import GcsSettings, GcsStore

        env = use_stack_environment()
        run_id = uuid.uuid4().hex[:10]
        self.project = f"obsingest-demo-{run_id}"
        self.bucket = f"obsingest-demo-{run_id}"
        # the user's PostgreSQL if OBSINGEST_REGISTRY_URL names one, else the stack's
        admin_url = os.environ.get("OBSINGEST_REGISTRY_URL", "")
        self.admin_url = admin_url if admin_url.startswith("postgresql") else env["OBSINGEST_REGISTRY_URL"]
        self.registry_url = provision.create_database(self.admin_url, "obsingest_demo")
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "registry-url.txt").write_text(self.registry_url + "\n")
        self.ingested_path = workdir / INGESTED_FILE
        self._ingested_lock = threading.Lock()

        self.store_url = f"gs://{self.bucket}"
        self.store_settings = StoreSettings(url=self.store_url)
        self.bus_settings = BusSettings(backend="pubsub", pubsub_project=self.project)
        # Edge workers are spawned processes: they read the project from the environment.
        os.environ["OBSINGEST_GCS_PROJECT"] = self.project
        self.registry = open_registry(RegistrySettings(url=self.registry_url))
        self.store = GcsStore(self.bucket, settings=GcsSettings(project=self.project))
        self.publisher = PubSubPublisher(self.project)
        self.keep = keep
        self.relay: Any = None
        self.manifest_relay: Any = None
        self._subscribers: list[Any] = []

    def start(self, on_arrival: ArrivalCallback, on_manifest: ManifestCallback | None) -> None:
        from functions.register import main as register_function
        from functions.register import wiring
        from infra.local.provision import setup, subscribe
        from infra.local.relay.push import InProcessTarget
        from infra.local.relay.settings import RelaySettings
        from infra.local.relay.wiring import build_relay
        from obsingest.bus.pull import SubscriberThread

        bus = self.bus_settings
        setup(self.bucket, bus, prefixes=("",), storage_client=self.store.client)  # the whole bucket
        self.ingested_path.write_text("")

        def listen(topic: str, subscription: str, handle: Any) -> SubscriberThread:
            subscribe(self.project, topic, subscription)
            return SubscriberThread(self.project, subscription, handle, name=subscription).start()

        self._subscribers = [
            listen(bus.arrivals_topic, "demo-arrivals", lambda d: on_arrival(ArrivalEvent.decode(d.data)))
        ]
        if on_manifest is not None:  # every subscriber polls the emulator, busy or not
            self._subscribers += [
                listen(
                    bus.exposures_topic,
                    "demo-exposures",
                    lambda d: on_manifest(ExposureManifest.decode(d.data)),
                ),
                listen(
                    bus.exposures_ingested_topic,
                    "demo-ingested",
                    lambda d: self._write_ingested(ExposureIngested.decode(d.data)),
                ),
            ]
        wiring.configure(
            wiring.build_service(
                open_store(self.store_settings), self.registry, self.publisher, self.store_settings, bus
            )
        )

        def relay(handler: Any, **options: Any) -> Any:
            settings = RelaySettings(min_backoff=0.0, max_backoff=2.0, max_attempts=5, **options)
            return build_relay(settings, bus, target=InProcessTarget(handler)).start()

        self.relay = relay(register_function.on_push)
        # exposures -> on_manifest; what it gives up on goes to the objects dead-letter topic,
        # with the reason, like every other push of the demo
        subscribe(self.project, bus.exposures_topic, MANIFESTS_SUBSCRIPTION)
        self.manifest_relay = relay(
            register_function.on_manifest,
            subscription=MANIFESTS_SUBSCRIPTION,
            dead_letter_topic=bus.objects_dlq_topic,
            concurrency=2,
        )

    def _write_ingested(self, event: ExposureIngested) -> None:
        line = json.dumps(event.to_record(), default=str, sort_keys=True)
        with self._ingested_lock, self.ingested_path.open("a") as out:
            out.write(line + "\n")

    def publish_manifest(self, manifest: ExposureManifest) -> None:
        self.publisher.publish(
            self.bus_settings.exposures_topic,
            manifest.encode(),
            key=f"{manifest.instrument}/{manifest.exposure}",
            attributes={"instrument": manifest.instrument, "exposure": str(manifest.exposure)},
        )

    def inject_notification(self, obj: StoredObject) -> None:
        data, attributes = gcs_notification_message(obj)
        self.publisher.publish(self.bus_settings.objects_topic, data, attributes=attributes)

    def finish(self, timeout: float) -> int:
        """Wait for the relay to drain (quiet, nothing in flight or awaiting retry) and for the
        subscribers to have received what was published; returns the dead-lettered count."""
        if self.relay is None:
            return 0
        deadline = time.monotonic() + timeout
        if not self.relay.wait_idle(quiet=1.5, timeout=timeout):
            raise TimeoutError(f"relay still busy after {timeout} s: notifications not drained")
        left = max(1.0, deadline - time.monotonic())
        if not self.manifest_relay.wait_idle(quiet=1.0, timeout=left):  # started with the relay
            raise TimeoutError(f"manifests relay still busy after {timeout} s")
        while time.monotonic() < deadline and any(s.idle_for() < 1.0 for s in self._subscribers):
            time.sleep(0.05)
        return sum(int(relay.counts()["dead_lettered"]) for relay in (self.relay, self.manifest_relay))

    def close(self) -> None:
        from functions.register import wiring

        for running in (self.relay, self.manifest_relay, *self._subscribers):
            if running is not None:
                running.stop()
        wiring.configure(None)
        self.publisher.close()
        self.registry.close()
        if not self.keep:
            self._delete_run_data()

    def _delete_run_data(self) -> None:
        """Delete the run's objects, bucket, database and Pub/Sub topics and subscriptions (best
        effort: a leftover is only disk space or emulator memory)."""
        bucket = self.store.client.bucket(self.bucket)
        deleted = 0
        try:
            for blob in self.store.client.list_blobs(self.bucket):
                blob.delete()
                deleted += 1
            bucket.delete()
            provision.drop_database(self.admin_url, self.registry_url)
            delete_pubsub_project(self.project)
        except Exception as exc:
            log_event(log, "demo.cleanup_failed", logging.WARNING, bucket=self.bucket, error=str(exc))
            return
        log_event(log, "demo.run_data_deleted", bucket=self.bucket, objects=deleted)


def delete_pubsub_project(project: str) -> int:
    """Delete every subscription and topic of a per-run Pub/Sub project (the emulator keeps
    them in memory until it stops); returns how many were deleted."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    deleted = 0
    try:
        for sub in subscriber.list_subscriptions(request={"project": f"projects/{project}"}):
            subscriber.delete_subscription(request={"subscription": sub.name})
            deleted += 1
        for topic in publisher.list_topics(request={"project": f"projects/{project}"}):
            publisher.delete_topic(request={"topic": topic.name})
            deleted += 1
    finally:
        subscriber.close()
        transport = getattr(publisher, "transport", None)
        if transport is not None:
            transport.close()
    return deleted
