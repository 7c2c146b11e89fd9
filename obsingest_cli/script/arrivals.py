"""``obsingest arrivals tail``'s work: print ArrivalEvents from Pub/Sub ``ccd-arrivals``, one
line per CCD (latency and per-stage deltas), deduplicated on dataset id; the pull subscription
is created if absent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from obsingest.messages import ArrivalEvent


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
    deltas = " ".join(f"{k}={v:.3f}s" if v is not None else f"{k}=?" for k, v in stage_deltas(event).items())
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


#: dataset ids remembered to report each CCD once (the oldest forgotten first)
SEEN_LIMIT = 1_000_000


def pull_arrivals(path: str, max_messages: int = 100) -> Iterator[tuple[ArrivalEvent | None, bytes]]:
    """Yield (event or None if undecodable, raw data) for every message; acks after yielding."""
    from google.api_core import exceptions as api_exceptions
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # untyped, namespace pkg

    from obsingest.errors import BadMessage

    client = pubsub_v1.SubscriberClient()
    try:
        while True:
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
                    request={"subscription": path, "ack_ids": [m.ack_id for m in response.received_messages]}
                )
    finally:
        client.close()


def run_tail(project: str | None, subscription: str, as_json_lines: bool, limit: int) -> int:
    """Print each new arrival until Ctrl-C or ``limit`` unique ones (0: forever)."""
    import contextlib

    from infra.local.provision import subscribe
    from obsingest.settings import BusSettings

    bus = BusSettings()
    seen: dict[str, None] = {}
    printed = 0
    with contextlib.suppress(KeyboardInterrupt):
        path = subscribe(project or bus.pubsub_project, bus.arrivals_topic, subscription)
        for event, data in pull_arrivals(path):
            if event is None:
                print(f"undecodable message ({len(data)} bytes)", file=sys.stderr)
                continue
            key = str(event.dataset_id)
            if key in seen:
                continue
            seen[key] = None
            if len(seen) > SEEN_LIMIT:
                seen.pop(next(iter(seen)))
            print(json.dumps(as_json(event)) if as_json_lines else format_line(event), flush=True)
            printed += 1
            if limit and printed >= limit:
                break
    return 0
