"""ExposureManifests into the registry (``on_manifest``), with the rules of object notifications:
acked, quarantined and acked, or 503. Once recorded the exposure is checked (CCDs before it count).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

from obsingest.errors import BadMessage, PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.messages import ExposureManifest
from obsingest.registry import Registry
from obsingest.registry.manifests import manifest_digest, quarantine_manifest, record_manifest
from obsingest.store.notifications import clip, message_id

log = get_logger("obsingest.register.manifests")


def decode_push(body: dict[str, Any]) -> ExposureManifest:
    """The manifest in a Pub/Sub push envelope; ``BadMessage`` if it is not one."""
    message = body["message"]
    where = f"message {clip(message_id(message)) or '(no id)'}"
    raw = message.get("data", "")
    if not isinstance(raw, str) or not raw:
        raise BadMessage(f"{where}: no base64 data (an ExposureManifest was expected)")
    try:
        data = base64.b64decode(raw, validate=True)
    except ValueError as exc:  # binascii.Error included
        raise BadMessage(f"{where}: data is not base64 ({exc})") from None
    try:
        return ExposureManifest.decode(data)
    except BadMessage as exc:
        raise BadMessage(f"{where}: {exc}") from None
    except Exception as exc:  # a body that decodes to values the typed view refuses
        raise BadMessage(f"{where}: not an ExposureManifest ({type(exc).__name__}: {exc})") from None


def handle_push(
    body: dict[str, Any], registry: Registry, on_recorded: Callable[[str, int], Any] | None = None
) -> tuple[str, int]:
    """(reply body, status) for one push delivery; ``on_recorded(instrument, exposure)`` runs
    once the manifest is recorded (its retriable errors propagate: 503)."""
    try:
        manifest = decode_push(body)
    except BadMessage as exc:
        return _quarantine(registry, f"pubsub:{message_id(body.get('message')) or 'no-id'}", exc)
    name = f"{manifest.instrument[:40]}/{manifest.exposure}"
    try:
        outcome = record_manifest(registry, manifest)
    except PermanentError as exc:
        try:
            digest = manifest_digest(manifest)
        except Exception:  # a manifest too broken to digest still gets its quarantine record
            digest = ""
        return _quarantine(registry, f"manifest/{name}", exc, digest)
    log_event(log, f"manifest.{outcome.status}", manifest=name, expected=outcome.expected)
    if on_recorded is not None:
        on_recorded(manifest.instrument, manifest.exposure)
    return f"{outcome.status} manifest {name} ({outcome.expected} detectors)", 200


def _quarantine(registry: Registry, source: str, exc: PermanentError, digest: str = "") -> tuple[str, int]:
    quarantine_manifest(registry, source, exc, digest)
    log_event(log, "manifest.quarantined", logging.WARNING, source=source, reason=exc.reason, error=str(exc))
    return f"quarantined: {exc.reason}: {clip(str(exc), 300)}", 200
