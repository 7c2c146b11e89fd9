"""``obsingest relay``: Pub/Sub push for emulators (which never push), ``infra/local/relay``."""

from __future__ import annotations

import argparse

from obsingest import defaults


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "relay",
        help="pull a Pub/Sub subscription and POST each message to a push URL (emulator push)",
        description=(
            "Deliver a pull subscription to an HTTP push endpoint exactly as Pub/Sub push would "
            "(JSON envelope, base64 data), ack only after a 2xx, nack with exponential backoff "
            "otherwise, and after N attempts publish to the dead-letter topic with the reason "
            "in attributes. Settings: OBSINGEST_RELAY_* (see infra/local/relay/settings.py)."
        ),
    )
    p.add_argument("--subscription", help=f"subscription (default: {defaults.RELAY_SUBSCRIPTION})")
    p.add_argument(
        "--push-url",
        action="append",
        help=f"the function's URL (default: {defaults.RELAY_PUSH_URL}); repeat it for several "
        "instances: deliveries are spread over them, and one whose instance does not answer "
        "goes to the next at once",
    )
    p.add_argument(
        "--dead-letter-topic",
        help="where given-up messages go (default: ccd-objects-dlq; manifests: exposures-dlq)",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        help=f"pushes before dead-lettering (default {defaults.RELAY_MAX_ATTEMPTS})",
    )
    p.add_argument(
        "--concurrency", type=int, help=f"pushes in flight at once (default {defaults.RELAY_CONCURRENCY})"
    )
    p.add_argument("--oidc-audience", help="sign pushes with an ID token for this audience")
    p.add_argument(
        "--until-idle",
        type=float,
        default=0.0,
        help="exit after this many seconds without messages (default: run until Ctrl-C)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Relay with the given options over ``OBSINGEST_RELAY_*``; print the final counts."""
    import json

    from infra.local.relay.settings import RelaySettings
    from infra.local.relay.wiring import run as relay

    urls = args.push_url or []
    names = ("subscription", "dead_letter_topic", "max_attempts", "concurrency", "oidc_audience")
    options = {name: getattr(args, name) for name in names}
    options.update(push_url=urls[0] if urls else None, push_urls=tuple(urls) if len(urls) > 1 else None)
    settings = RelaySettings(**{k: v for k, v in options.items() if v is not None})
    print(json.dumps(relay(settings, args.until_idle)))
    return 0
