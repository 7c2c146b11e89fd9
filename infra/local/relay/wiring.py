"""Build a relay on Pub/Sub from settings (the one place that picks the relay's concrete edges),
and run it as a process (``obsingest relay``)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from infra.local.relay.loop import Relay
from infra.local.relay.settings import RelaySettings
from obsingest import logs
from obsingest.logs import get_logger, log_event
from obsingest.metrics import Metrics
from obsingest.settings import BusSettings

log = get_logger("obsingest.relay")


def push_target(settings: RelaySettings) -> Any:
    """HTTP push to the function; over several instances, spread with failover."""
    from infra.local.relay.push import HttpPushTarget
    from infra.local.relay.spread import SpreadPushTarget

    urls = settings.urls()
    targets = [
        HttpPushTarget(url, timeout=settings.push_timeout, oidc_audience=settings.oidc_audience)
        for url in urls
    ]
    if len(targets) == 1:
        return targets[0]

    def failed_over(index: int, result: Any) -> None:
        log_event(log, "relay.failover", logging.INFO, to=urls[index], error=result.describe()[:200])

    return SpreadPushTarget(
        targets,
        cooldown=settings.failover_cooldown,
        max_cooldown=settings.failover_max_cooldown,
        on_failover=failed_over,
    )


def build_relay(
    settings: RelaySettings, bus: BusSettings, target: Any = None, metrics: Metrics | None = None
) -> Relay:
    """A relay on the settings' subscription, pushing to ``target`` (default: the HTTP push URL),
    counting into ``metrics`` (default: a registry of its own, so relays in one process count apart)."""
    from infra.local.relay.dead_letter import PubSubDeadLetter
    from obsingest.bus.pull import PubSubPullSource
    from obsingest.metrics import private_metrics

    metrics = metrics or private_metrics()
    metrics.start("relay")
    source = PubSubPullSource(bus.pubsub_project, settings.subscription)
    return Relay(
        source=source,
        target=target or push_target(settings),
        dead_letters=PubSubDeadLetter(
            bus.pubsub_project, settings.dead_letter_topic or bus.objects_dlq_topic
        ),
        settings=settings,
        subscription_path=source.path,
        metrics=metrics,
    )


def run(settings: RelaySettings, until_idle: float = 0.0) -> dict[str, int]:
    """Relay until SIGTERM/Ctrl-C, or (``until_idle`` > 0) until nothing was pulled or awaits
    retry for that many seconds; the final counts."""
    from obsingest.metrics import get_metrics
    from obsingest.metrics_http import serve_metrics

    logs.configure()
    relay = build_relay(settings, BusSettings(), metrics=get_metrics())
    metrics_server = serve_metrics()  # /metrics on OBSINGEST_METRICS_PORT (0: off)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    relay.start()
    try:
        while not stop.wait(0.2):
            if until_idle and relay.pending_retries == 0 and relay.idle_for() >= until_idle:
                break
    except KeyboardInterrupt:
        pass
    finally:
        relay.stop()
        if metrics_server is not None:
            metrics_server.close()
    return relay.counts()
