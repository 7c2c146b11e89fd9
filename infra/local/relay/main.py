"""The relay as a process: relay until SIGTERM/Ctrl-C, or until idle for a while."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

from infra.local.relay.settings import RelaySettings
from infra.local.relay.wiring import build_relay
from obsingest import logs
from obsingest.settings import BusSettings


def run(settings: RelaySettings, until_idle: float = 0.0) -> dict[str, int]:
    """Relay ``settings.subscription`` to its push URL; the final counts. ``until_idle`` > 0:
    return once nothing was pulled or awaits retry for that many seconds."""
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


def main(options: dict[str, Any], until_idle: float = 0.0) -> int:
    """``obsingest relay``: its options over ``OBSINGEST_RELAY_*``, relay, print the counts."""
    settings = RelaySettings(**{k: v for k, v in options.items() if v is not None})
    print(json.dumps(run(settings, until_idle)))
    return 0
