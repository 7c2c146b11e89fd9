"""``obsingest relay``: Pub/Sub push for emulators (which never push): pull, POST, ack on 2xx.

Runs until interrupted (or ``--until-idle`` seconds without messages). After
``--max-attempts`` failed pushes a message goes to the dead-letter topic with ``dlq_reason``,
``dlq_attempts`` and ``dlq_status`` attributes and the original is acked.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from typing import Any

from obsingest.relay.core import Relay, RelaySettings
from obsingest.settings import BusSettings


def build_relay(
    settings: RelaySettings,
    bus: BusSettings,
    target: Any = None,
) -> Relay:
    """A relay on the settings' subscription, pushing to ``target`` (default: HTTP push URL)."""
    from obsingest.relay.pubsub import PubSubDeadLetter, PubSubPullSource
    from obsingest.relay.push import HttpPushTarget

    source = PubSubPullSource(bus.pubsub_project, settings.subscription)
    return Relay(
        source=source,
        target=target
        or HttpPushTarget(
            settings.push_url, timeout=settings.push_timeout, oidc_audience=settings.oidc_audience
        ),
        dead_letters=PubSubDeadLetter(bus.pubsub_project, bus.objects_dlq_topic),
        settings=settings,
        subscription_path=source.path,
    )


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "relay",
        help="pull a Pub/Sub subscription and POST each message to a push URL (emulator push)",
        description=(
            "Deliver a pull subscription to an HTTP push endpoint exactly as Pub/Sub push would "
            "(JSON envelope, base64 data), ack only after a 2xx, nack with exponential backoff "
            "otherwise, and after N attempts publish to the dead-letter topic with the reason "
            "in attributes. Settings: OBSINGEST_RELAY_* (see obsingest/relay/core.py)."
        ),
    )
    p.add_argument("--subscription", help="subscription (default: ccd-objects-relay)")
    p.add_argument("--push-url", help="the function's URL (default: http://127.0.0.1:8080/)")
    p.add_argument("--max-attempts", type=int, help="pushes before dead-lettering (default 5)")
    p.add_argument("--concurrency", type=int, help="pushes in flight at once (default 8)")
    p.add_argument("--oidc-audience", help="sign pushes with an ID token for this audience")
    p.add_argument(
        "--until-idle",
        type=float,
        default=0.0,
        help="exit after this many seconds without messages (default: run until Ctrl-C)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from obsingest import logs

    overrides = {
        "subscription": args.subscription,
        "push_url": args.push_url,
        "max_attempts": args.max_attempts,
        "concurrency": args.concurrency,
        "oidc_audience": args.oidc_audience,
    }
    settings = RelaySettings(**{k: v for k, v in overrides.items() if v is not None})
    logs.configure()
    relay = build_relay(settings, BusSettings())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    relay.start()
    try:
        while not stop.is_set():
            stop.wait(0.2)
            idle = relay.pending_retries == 0 and relay.idle_for() >= args.until_idle
            if args.until_idle and idle:
                break
    except KeyboardInterrupt:
        pass
    finally:
        relay.stop()
    print(json.dumps(relay.stats.__dict__))
    return 0
