"""What a downstream test gets: the facility's endpoints and the few things it does with them."""

from __future__ import annotations

import time
import uuid
from contextlib import closing
from typing import Any

from infra.containers.facility import Facility, FacilityEndpoints, environ
from obsingest.messages import ArrivalEvent


class FacilityHandle:
    """Endpoints of a containerised facility (``endpoints``, ``env()``) plus helpers: write a
    CCD into the bucket, subscribe to the ArrivalEvents, read them, ask the presence API."""

    def __init__(self, facility: Facility, endpoints: FacilityEndpoints) -> None:
        self.facility = facility
        self.endpoints = endpoints

    def env(self) -> dict[str, str]:
        """PUBSUB_EMULATOR_HOST, STORAGE_EMULATOR_HOST, OBSINGEST_* ...: point a client here."""
        return self.endpoints.env()

    @property
    def bucket(self) -> str:
        return self.endpoints.bucket

    @property
    def project(self) -> str:
        return self.endpoints.project

    def put_ccd(self, name: str, data: bytes) -> None:
        """Write an object into the facility's bucket, as a sender at the summit would."""
        from obsingest.store.gcs import GcsSettings, GcsStore

        with (
            environ(self.env()),
            closing(GcsStore(self.bucket, settings=GcsSettings(project=self.project))) as store,
        ):
            store.put(name, data)

    def subscribe_arrivals(self, name: str | None = None) -> str:
        """A new pull subscription on the arrivals topic (sees what is published after it)."""
        from infra.local.provision import subscribe
        from obsingest.settings import BusSettings

        name = name or f"downstream-{uuid.uuid4().hex[:8]}"
        bus = BusSettings(backend="pubsub", pubsub_project=self.project)
        with environ(self.env()):
            subscribe(self.project, bus.arrivals_topic, name)
        return name

    def arrivals(self, subscription: str, count: int = 1, timeout: float = 60.0) -> list[ArrivalEvent]:
        """At least ``count`` ArrivalEvents from ``subscription`` (acked), or what came by
        ``timeout`` seconds. A message that is no ArrivalEvent is acked and raised (BadMessage)
        once; the events pulled with it are left to the next read."""
        from obsingest.bus.pull import PubSubPullSource
        from obsingest.errors import BadMessage

        events: list[ArrivalEvent] = []
        with environ(self.env()), closing(PubSubPullSource(self.project, subscription)) as source:
            deadline = time.monotonic() + timeout
            while len(events) < count and (left := deadline - time.monotonic()) > 0:
                batch = source.pull(100, min(left, 5.0))
                good, bad = [], []
                for delivery in batch:
                    try:
                        good.append(ArrivalEvent.decode(delivery.data))
                    except BadMessage as exc:
                        bad.append((delivery, exc))
                if bad:  # not redelivered into every later read
                    source.ack([d.ack_id for d, _ in bad])
                    first, why = bad[0]
                    raise BadMessage(
                        f"{len(bad)} message(s) on {subscription} are no ArrivalEvent; "
                        f"message {first.message_id}: {why}"
                    )
                events += good
                if batch:
                    source.ack([d.ack_id for d in batch])
        return events

    def presence(self, path: str) -> Any:
        """GET a presence API path (e.g. ``/v1/ccds/LSSTComCam/2026112300001/4``) as JSON."""
        import requests

        return requests.get(f"{self.endpoints.presence_url}{path}", timeout=10).json()

    def logs(self, component: str) -> str:
        """A component's log tail: register, relay, facility, presence (assembler with Kafka)."""
        return self.facility.logs(component)
