"""``obsingest daq``'s work: the DAQ simulator (``producers.daq``) from the command line."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

from obsingest_cli.options import call_with_options

if TYPE_CHECKING:
    from obsingest.messages import ExposureManifest
    from obsingest.retry import RetryPolicy

#: How hard one manifest is pushed onto the bus before it is reported unpublished: a Pub/Sub
#: publish waits up to 5 s for its confirmation, so about half a minute of a bus outage is ridden
#: out (the night's CCDs wait meanwhile: the manifest is due before them).
PUBLISH_ATTEMPTS = 8
PUBLISH_DEADLINE = 30.0


class ManifestPublisher:
    """``play_night``'s ``on_manifest``: publish each ExposureManifest (key instrument/exposure),
    retrying transient failures; one that still fails is reported and kept in ``failed``, and
    the night goes on."""

    def __init__(
        self, publisher: Any, topic: str, policy: RetryPolicy | None = None, sleep: Any = time.sleep
    ) -> None:
        from obsingest.retry import RetryPolicy

        self.publisher = publisher
        self.topic = topic
        self.policy = policy or RetryPolicy(
            max_attempts=PUBLISH_ATTEMPTS, base_delay=0.5, max_delay=5.0, deadline=PUBLISH_DEADLINE
        )
        self.sleep = sleep
        self.published: list[int] = []
        self.failed: list[int] = []

    def __call__(self, manifest: ExposureManifest) -> None:
        from obsingest.logs import get_logger, log_event
        from obsingest.retry import Transient, call_with_retries

        log = get_logger("obsingest.daq")
        key = f"{manifest.instrument}/{manifest.exposure}"
        data = manifest.encode()
        attributes = {"instrument": manifest.instrument, "exposure": str(manifest.exposure)}

        def classify(exc: BaseException) -> Transient | None:
            return Transient("publish") if getattr(exc, "retriable", False) else None

        def on_retry(attempt: Any) -> None:
            log_event(
                log,
                "daq.manifest_publish_retry",
                logging.WARNING,
                manifest=key,
                attempt=attempt.number,
                error=str(attempt.error),
            )

        try:
            call_with_retries(
                lambda _left: self.publisher.publish(self.topic, data, key=key, attributes=attributes),
                classify,
                self.policy,
                what=f"publish manifest {key}",
                on_retry=on_retry,
                sleep=self.sleep,
            )
        except Exception as exc:  # reported loudly; the night (and its files) go on
            self.failed.append(manifest.exposure)
            log_event(
                log, "daq.manifest_unpublished", logging.ERROR, manifest=key, topic=self.topic, error=str(exc)
            )
            print(f"error: manifest {key} NOT published on {self.topic}: {exc}", file=sys.stderr)
            return
        self.published.append(manifest.exposure)


def _template(args: argparse.Namespace) -> tuple[Any, str]:
    """The ``--template`` header's primary cards, None without one (ValueError if unreadable),
    and the instrument: ``--instrument``, else the template's, else LSSTCam."""
    if args.template is None:
        return None, args.instrument or "LSSTCam"
    from producers.daq.header import load_template, template_instrument

    try:
        template = load_template(args.template)
    except OSError as exc:
        raise ValueError(f"--template: {exc}") from None
    return template, args.instrument or template_instrument(template)


def night(args: argparse.Namespace) -> int:
    """Play a night into the hand-off directory (``--publish-manifests``: manifests on the bus too)."""
    from producers.daq.night import NightPlan, play_night

    publisher: Any = None
    manifests: ManifestPublisher | None = None
    try:
        template, instrument = _template(args)
        plan = call_with_options(NightPlan, args, instrument=instrument, template=template)
        if args.publish_manifests:
            from obsingest.bus.factory import open_publisher
            from obsingest.settings import BusSettings

            bus = BusSettings()
            publisher = open_publisher(bus)
            manifests = ManifestPublisher(publisher, bus.exposures_topic)
        played = play_night(
            plan, lambda e: print(f"exposure {e.exposure}: {len(e.files)} CCDs"), on_manifest=manifests
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if publisher is not None:
            publisher.close()
    print(f"wrote {sum(len(e.files) for e in played)} CCDs in {len(played)} exposures")
    if manifests is not None:
        print(f"published {len(manifests.published)} manifests on {manifests.topic}")
        if manifests.failed:
            print(
                f"error: {len(manifests.failed)} manifests NOT published: "
                f"{', '.join(map(str, manifests.failed))}",
                file=sys.stderr,
            )
            return 1
    return 0


def write_one(args: argparse.Namespace) -> int:
    """Write one simulated raw CCD, named as the camera names it when OUT is a directory."""
    from datetime import UTC, datetime
    from pathlib import Path

    from obsingest.dataid import exposure_day_obs
    from producers.daq.header import template_detector
    from producers.daq.simulator import CcdSpec, write_raw_ccd

    try:
        template, instrument = _template(args)
        detector = args.detector
        if detector is None and template is not None:
            detector = template_detector(template)
        if detector is None:
            raise ValueError("--detector is needed (the template does not name one)")
        exptime = args.exptime
        if exptime is None:
            found = dict(template or ()).get("EXPTIME")
            exptime = float(found) if isinstance(found, (int, float)) else 30.0
        start = datetime.fromisoformat(args.obs_start) if args.obs_start else datetime.now(UTC)
        spec = call_with_options(
            CcdSpec,
            args,
            instrument=instrument,
            detector=detector,
            day_obs=exposure_day_obs(args.exposure),
            obs_start=start,
            exposure_time=exptime,
            template=template,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    output = Path(args.output)
    path = write_raw_ccd(spec, output / spec.file_name if output.is_dir() else output)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0
