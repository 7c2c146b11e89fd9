"""``obsingest setup``'s work: settings -> ``infra.local.provision.setup`` -> a printed report."""

from __future__ import annotations

import json
from collections.abc import Sequence

from obsingest import defaults
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings


def bucket_from_settings(store: StoreSettings) -> str | None:
    if store.url.startswith("gs://"):
        return store.url[len("gs://") :].split("/", 1)[0]
    return None


def kafka_bootstrap_from_settings(bus: BusSettings) -> str | None:
    """Kafka's address when Kafka is one of the bus backends: the broker the arrivals publisher
    uses (``BusSettings``: its own variable, else KAFKA_BOOTSTRAP_SERVERS)."""
    backends = {b.strip() for b in bus.backend.split(",")}
    if "kafka" not in backends:
        return None
    return bus.kafka_bootstrap_servers


def run_setup(
    *,
    bucket: str | None,
    project: str | None,
    prefixes: Sequence[str] | None,
    subscription: str,
    kafka: str | None,
    as_json: bool,
    registry: str | None = None,
    instruments: Sequence[str] | None = None,
) -> int:
    """Create what is missing and print what exists; 2 when no bucket (and no Butler) is known."""
    from infra.local.provision import setup
    from obsingest import logs

    logs.configure("WARNING")
    butler_done = _butler(registry, tuple(instruments or ("LSSTCam",)), as_json)
    bus = BusSettings(pubsub_project=project) if project else BusSettings()
    bucket = bucket or bucket_from_settings(StoreSettings())
    if not bucket:
        if butler_done:
            return 0
        print("obsingest setup: give --bucket or set OBSINGEST_STORE_URL=gs://BUCKET")
        return 2
    report = setup(
        bucket,
        bus,
        prefixes=tuple(prefixes or defaults.NOTIFIED_PREFIXES),
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


def _butler(registry: str | None, instruments: tuple[str, ...], as_json: bool) -> bool:
    """Set up the Butler repository the registry URL names, if it names one; printed."""
    from obsingest.registry.butler_repo import is_butler_url

    settings = RegistrySettings(url=registry) if registry else RegistrySettings()
    if not is_butler_url(settings.url):
        if registry:
            raise SystemExit(f"obsingest setup: --registry {registry!r} is not butler:<repo>")
        return False
    from obsingest.registry.butler_setup import set_up_repository

    done = set_up_repository(settings, instruments)
    if as_json:
        print(json.dumps({"butler": done}, indent=2))
    else:
        print(
            f"ready    Butler {settings.url}: dataset type {done['dataset_type']} "
            f"({done['storage_class']}), runs {', '.join(done['runs'])}, "
            f"instruments {', '.join(done['instruments'])} with their detectors"
        )
    return True
