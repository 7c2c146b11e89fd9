"""``obsingest setup``'s work: settings -> ``infra.local.provision.setup`` -> a printed report."""

from __future__ import annotations

import json
import os

from obsingest.settings import BusSettings, StoreSettings


def bucket_from_settings(store: StoreSettings) -> str | None:
    if store.url.startswith("gs://"):
        return store.url[len("gs://") :].split("/", 1)[0]
    return None


def kafka_bootstrap_from_settings(bus: BusSettings) -> str | None:
    """Kafka's address when Kafka is one of the bus backends (KAFKA_BOOTSTRAP_SERVERS wins)."""
    backends = {b.strip() for b in bus.backend.split(",")}
    if "kafka" not in backends:
        return None
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or bus.kafka_bootstrap_servers


def run_setup(
    *,
    bucket: str | None,
    project: str | None,
    prefixes: tuple[str, ...],
    subscription: str,
    kafka: str | None,
    as_json: bool,
) -> int:
    """Create what is missing and print what exists; 2 when no bucket is known."""
    from infra.local.provision import setup
    from obsingest import logs

    logs.configure("WARNING")
    bus = BusSettings()
    if project:
        bus = bus.model_copy(update={"pubsub_project": project})
    bucket = bucket or bucket_from_settings(StoreSettings())
    if not bucket:
        print("obsingest setup: give --bucket or set OBSINGEST_STORE_URL=gs://BUCKET")
        return 2
    report = setup(
        bucket,
        bus,
        prefixes=prefixes,
        relay_subscription=subscription,
        kafka_bootstrap=kafka or kafka_bootstrap_from_settings(bus),
    )
    if as_json:
        print(json.dumps({"created": report.created, "existing": report.existing}, indent=2))
    else:
        for what in report.created:
            print(f"created  {what}")
        for what in report.existing:
            print(f"exists   {what}")
    return 0
