"""``obsingest arrivals tail``'s work: ArrivalEvents from Pub/Sub, one line per new CCD."""

from __future__ import annotations

import json
import sys
from typing import Any

from obsingest.messages import ArrivalEvent

STAGE_TIMES = (
    ("compress", "compressed_time"),
    ("store", "stored_time"),
    ("register", "registered_time"),
    ("publish", "published_time"),
)


def stage_deltas(event: ArrivalEvent) -> dict[str, float | None]:
    """Seconds spent in each stage: readout->compressed->stored->registered->published."""
    out: dict[str, float | None] = {}
    previous = event.readout_time
    for name, attr in STAGE_TIMES:
        stamp = getattr(event, attr)
        out[name] = None if stamp is None else round((stamp - previous).total_seconds(), 6)
        previous = stamp or previous
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


def run_tail(project: str | None, subscription: str, as_json_lines: bool, limit: int) -> int:
    """Print each new arrival until Ctrl-C or ``limit`` unique ones (0: forever)."""
    import contextlib
    import itertools
    import threading

    from infra.local.provision import subscribe
    from obsingest.bus.pull import Delivery, SubscriberThread
    from obsingest.errors import BadMessage
    from obsingest.settings import BusSettings

    bus = BusSettings()
    seen: dict[str, None] = {}
    printed = itertools.count(1)
    done = threading.Event()

    def show(delivery: Delivery) -> None:
        try:
            event = ArrivalEvent.decode(delivery.data)
        except BadMessage:
            print(f"undecodable message ({len(delivery.data)} bytes)", file=sys.stderr)
            return
        key = str(event.dataset_id)
        if key in seen or done.is_set():
            return
        seen[key] = None
        if len(seen) > SEEN_LIMIT:
            seen.pop(next(iter(seen)))
        print(json.dumps(as_json(event)) if as_json_lines else format_line(event), flush=True)
        if limit and next(printed) >= limit:
            done.set()

    project = project or bus.pubsub_project
    path = subscribe(project, bus.arrivals_topic, subscription)
    tail = SubscriberThread(project, path, show, name="arrivals-tail").start()
    with contextlib.suppress(KeyboardInterrupt):
        done.wait()
    tail.stop()
    return 0
