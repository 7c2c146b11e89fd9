"""``obsingest arrivals tail``: print ArrivalEvents from Pub/Sub ``ccd-arrivals`` as they come.

Creates its own pull subscription if absent (a new subscription sees only messages published
after it exists), deduplicates on dataset id (delivery is at-least-once and a redelivered
notification republishes the same event), and prints one line per CCD: data id, dataset id,
latency readout -> published and the per-stage deltas.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from obsingest.messages import ArrivalEvent
from obsingest.settings import BusSettings

DEFAULT_SUBSCRIPTION = "ccd-arrivals-tail"


def stage_deltas(event: ArrivalEvent) -> dict[str, float | None]:
    """Seconds spent in each stage: readout->compressed->stored->registered->published."""
    stamps = [
        ("compress", event.compressed_time),
        ("store", event.stored_time),
        ("register", event.registered_time),
        ("publish", event.published_time),
    ]
    out: dict[str, float | None] = {}
    previous = event.readout_time
    for name, stamp in stamps:
        if stamp is None:
            out[name] = None
            continue
        out[name] = round((stamp - previous).total_seconds(), 6)
        previous = stamp
    return out


def format_line(event: ArrivalEvent) -> str:
    deltas = " ".join(
        f"{k}={v:.3f}s" if v is not None else f"{k}=?" for k, v in stage_deltas(event).items()
    )
    return (
        f"{event.data_id.key}  {event.dataset_id}  latency={event.latency:.3f}s  {deltas}  "
        f"{event.transport}  {event.uri}"
    )


def as_json(event: ArrivalEvent) -> dict[str, Any]:
    record = event.to_record()
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in record.items()}
    out["latency_s"] = round(event.latency, 6)
    out["stages_s"] = stage_deltas(event)
    return out


class Deduplicator:
    """Remembers the dataset ids seen (bounded), so each CCD is reported once."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.limit = limit
        self._seen: dict[str, None] = {}

    def first_time(self, dataset_id: str) -> bool:
        if dataset_id in self._seen:
            return False
        self._seen[dataset_id] = None
        if len(self._seen) > self.limit:
            self._seen.pop(next(iter(self._seen)))
        return True


def ensure_subscription(project: str, topic: str, subscription: str) -> str:
    """Create the subscription if absent (Pub/Sub's default 10 s ack deadline); its path."""
    from google.cloud import pubsub_v1

    from obsingest.bus.pubsub import topic_path
    from obsingest.cli.setup import SetupReport
    from obsingest.cli.setup import ensure_subscription as create_if_absent
    from obsingest.relay.pubsub import subscription_path

    path = subscription_path(project, subscription)
    client = pubsub_v1.SubscriberClient()
    try:
        create_if_absent(client, path, topic_path(project, topic), SetupReport(), ack_deadline=10)
    finally:
        client.close()
    return path


def pull_arrivals(
    path: str, stop: Callable[[], bool], max_messages: int = 100
) -> Iterator[tuple[ArrivalEvent | None, bytes]]:
    """Yield (event or None if undecodable, raw data) for every message; acks after yielding."""
    from google.api_core import exceptions as api_exceptions
    from google.cloud import pubsub_v1

    from obsingest.errors import BadMessage

    client = pubsub_v1.SubscriberClient()
    try:
        while not stop():
            try:
                response = client.pull(
                    request={"subscription": path, "max_messages": max_messages}, timeout=5
                )
            except api_exceptions.DeadlineExceeded:
                continue
            for received in response.received_messages:
                data = bytes(received.message.data)
                try:
                    yield ArrivalEvent.decode(data), data
                except BadMessage:
                    yield None, data
            if response.received_messages:
                client.acknowledge(
                    request={
                        "subscription": path,
                        "ack_ids": [m.ack_id for m in response.received_messages],
                    }
                )
    finally:
        client.close()


def tail(
    project: str,
    topic: str,
    subscription: str,
    *,
    as_json_lines: bool = False,
    limit: int = 0,
    out: TextIO = sys.stdout,
) -> int:
    """Print arrivals until ``limit`` unique ones (0: forever); returns how many were printed."""
    path = ensure_subscription(project, topic, subscription)
    dedup = Deduplicator()
    printed = 0
    for event, data in pull_arrivals(path, lambda: False):
        if event is None:
            print(f"undecodable message ({len(data)} bytes)", file=sys.stderr)
            continue
        if not dedup.first_time(str(event.dataset_id)):
            continue
        line = json.dumps(as_json(event)) if as_json_lines else format_line(event)
        print(line, file=out, flush=True)
        printed += 1
        if limit and printed >= limit:
            break
    return printed


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "arrivals",
        help="follow ArrivalEvents on Pub/Sub",
        description="Follow the ArrivalEvents the register function publishes to ccd-arrivals.",
    )
    sub = p.add_subparsers(dest="arrivals_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda _args: (p.print_help(), 2)[1])
    t = sub.add_parser(
        "tail",
        help="print arrivals as they come, one line per CCD (deduplicated on dataset id)",
        description=(
            "Subscribe to ccd-arrivals (creating the subscription if absent) and print each "
            "new CCD: data id, dataset id, latency readout -> published, per-stage deltas."
        ),
    )
    t.add_argument("--subscription", default=DEFAULT_SUBSCRIPTION, help="subscription to use")
    t.add_argument("--project", help="Pub/Sub project (default: OBSINGEST_BUS_PUBSUB_PROJECT)")
    t.add_argument("--json", action="store_true", help="JSON lines instead of text")
    t.add_argument("--limit", type=int, default=0, help="exit after N unique arrivals")
    t.set_defaults(func=run_tail)


def run_tail(args: argparse.Namespace) -> int:
    bus = BusSettings()
    with contextlib.suppress(KeyboardInterrupt):
        tail(
            args.project or bus.pubsub_project,
            bus.arrivals_topic,
            args.subscription,
            as_json_lines=args.json,
            limit=args.limit,
        )
    return 0
