"""``obsingest reconcile`` and ``obsingest redrive``'s work: build the facility service from
settings (``functions.register.facility``), wire the local stack's repair, print reports."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from obsingest import defaults
from obsingest.settings import BusSettings, StoreSettings
from obsingest_cli.script.setup import bucket_from_settings


def local_stack_repair(
    store: StoreSettings, bus: BusSettings, prefixes: tuple[str, ...] = defaults.NOTIFIED_PREFIXES
) -> Callable[[], Any] | None:
    """Re-ensure topics, subscriptions and notification configs with ``infra.local.provision``
    when the deployment is the local stack (the Pub/Sub emulator and a gs:// bucket); None
    elsewhere: production's belong to Terraform, and a broken canary is reported, not fixed."""
    bucket = bucket_from_settings(store)
    if not os.environ.get("PUBSUB_EMULATOR_HOST") or not bucket:
        return None

    def repair() -> Any:
        from infra.local.provision import setup
        from infra.local.relay.settings import RelaySettings

        relay = RelaySettings()
        return setup(bucket, bus, prefixes=prefixes, relay_subscription=relay.subscription, relay=relay)

    return repair


def reconcile(
    *,
    every: float | None,
    window: float | None,
    grace: float | None,
    prefixes: Sequence[str] | None,
    dry_run: bool,
    canary: bool,
    repair: bool,
    as_json: bool,
) -> int:
    """One pass (exit code = health), or the service with ``every``."""
    from datetime import timedelta

    from functions.register.facility.canary import CanaryWatch
    from functions.register.facility.main import serve
    from functions.register.facility.service import NOTIFICATIONS_BROKEN
    from functions.register.facility.settings import ReconcileSettings
    from functions.register.facility.wiring import facility_from_settings
    from obsingest import logs
    from obsingest.messages import utcnow

    logs.configure("INFO" if every else "WARNING")
    given = {"every": every, "window": window, "grace": grace, "prefixes": tuple(prefixes or ()) or None}
    overrides: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    service_mode = bool(every) and not dry_run
    overrides["canary"] = canary and service_mode
    hook = local_stack_repair(StoreSettings(), BusSettings()) if repair else None
    # one pass reconciles and drains; redriving is the service's or `obsingest redrive`'s
    facility = facility_from_settings(hook, redrive=service_mode, **overrides)
    if service_mode:
        print(f"reconcile: a pass every {facility.every:g} s until stopped (Ctrl-C)", flush=True)
        return serve(facility)
    assert facility.reconciler is not None
    settings = ReconcileSettings(**overrides)
    if dry_run:
        since = utcnow() - timedelta(seconds=facility.window)
        rec = facility.reconciler.run(since, dry_run=True)
        _print({"reconcile": rec.as_dict()}, as_json)
        return 0 if rec.missing == 0 and not rec.gone else 1
    report = facility.run_pass()
    service = facility.reconciler.service
    watch = CanaryWatch(
        service.store, service.registry.audit, settings.canary_prefix, timeout=settings.canary_timeout
    )
    state = watch.state()  # what the service's canaries say, if one runs
    out = report.as_dict()
    out["notifications_healthy"] = state.healthy
    out["stats"] = facility.snapshot()
    _print(out, as_json)
    if not state.healthy:
        return NOTIFICATIONS_BROKEN
    return facility.health()


def redrive(*, reason: str | None, dry_run: bool, parked: bool, project: str | None, as_json: bool) -> int:
    """One manual pass: every selected letter back to the objects topic now."""
    from functions.register.facility.settings import RedriveSettings
    from functions.register.facility.wiring import build_redriver
    from obsingest import logs

    logs.configure("WARNING")
    bus = BusSettings(pubsub_project=project) if project else BusSettings()
    redriver = build_redriver(bus, RedriveSettings(), parked=parked)
    report = redriver.run_pass(reason=reason, dry_run=dry_run, force=True)
    _print({"source": "parked" if parked else "dead-letters", **report.as_dict()}, as_json)
    return 1 if report.failed else 0


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    for key, value in report.items():
        print(f"{key}: {json.dumps(value, default=str)}")
