"""Build the facility service and the redriver from settings: the one place picking their edges."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from functions.register.exposures import ExposureCloser
from functions.register.facility.canary import CanaryWatch
from functions.register.facility.reconcile import Reconciler
from functions.register.facility.redrive import Redriver
from functions.register.facility.service import FacilityService
from functions.register.facility.settings import ReconcileSettings, RedriveSettings
from functions.register.service import RegisterService
from obsingest.bus.base import Publisher
from obsingest.metrics import private_metrics
from obsingest.registry.ingested import IngestedCheck
from obsingest.settings import BusSettings, hold_subscription


def build_redriver(
    bus: BusSettings,
    settings: RedriveSettings,
    *,
    parked: bool = False,
    publisher: Publisher | None = None,
    source: Any = None,
) -> Redriver:
    """A redriver on the dead-letter hold subscription (``parked``: on the parked one)."""
    from obsingest.bus.pubsub import PubSubPublisher
    from obsingest.bus.pull import PubSubPullSource

    parked_topic = settings.parked_topic or bus.objects_parked_topic
    held = hold_subscription(parked_topic) if parked else settings.subscription or bus.objects_dlq_hold
    return Redriver(
        source=source or PubSubPullSource(bus.pubsub_project, held),
        publisher=publisher or PubSubPublisher(bus.pubsub_project),
        objects_topic=bus.objects_topic,
        parked_topic=parked_topic,
        policy=settings,
    )


def build_facility(
    service: RegisterService,
    bus: BusSettings,
    settings: ReconcileSettings,
    redrive: RedriveSettings | None = None,
    *,
    repair: Callable[[], Any] | None = None,
    redriver: Redriver | None = None,
) -> FacilityService:
    """The service on a register service; redrive runs for a GCS bucket when ``redrive.enabled``."""
    from obsingest.store.gcs import GcsStore

    redrive = redrive or RedriveSettings()
    if redriver is None and redrive.enabled and isinstance(service.store, GcsStore):
        redriver = build_redriver(bus, redrive)
    canary: CanaryWatch | None = None
    closer: ExposureCloser | None = None
    if settings.canary:
        every, timeout = settings.canary_every, settings.canary_timeout
        canary = CanaryWatch(service.store, service.registry.audit, settings.canary_prefix, every, timeout)
    if settings.exposures:  # the register service's sweep, its closings recorded as by ``reconcile``
        check = IngestedCheck(
            service.registry, service.ingested_topic, service.budget_seconds, closed_by="reconcile"
        )
        allowance = service.budget_seconds + settings.exposure_grace
        closer = ExposureCloser(check, service.announcer, service.metrics, allowance=allowance)
    return FacilityService(
        reconciler=Reconciler(
            service, tuple(settings.prefixes), grace=settings.grace, lag=settings.lag, hold=settings.hold
        ),
        closer=closer,
        announcer=service.announcer,
        canary=canary,
        redriver=redriver,
        repair=repair,
        window=settings.window,
        every=settings.every,
        full_every=settings.full_every,
        repair_every=settings.repair_every,
        drain_limit=settings.drain_limit,
        outbox_retention=timedelta(days=settings.outbox_retention_days),
        metrics=service.metrics if service.metrics is not None else private_metrics(),
    )


def facility_from_settings(
    repair: Callable[[], Any] | None = None, redrive: bool = True, **overrides: Any
) -> FacilityService:
    """From the environment's settings; ``redrive=False`` leaves the redrive out."""
    from functions.register.wiring import service_from_settings

    settings = ReconcileSettings(**overrides)
    redrive_settings = RedriveSettings() if redrive else RedriveSettings(enabled=False)
    return build_facility(service_from_settings(), BusSettings(), settings, redrive_settings, repair=repair)
