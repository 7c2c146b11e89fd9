"""``obsingest arrivals tail``'s work: ArrivalEvents from Pub/Sub, one line per new CCD."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Generator
from contextlib import closing, suppress
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


#: the wait before subscribing again after the bus failed the tail
RESUBSCRIBE_SECONDS = 1.0
#: dataset ids remembered to report each CCD once (the oldest forgotten first)
SEEN_LIMIT = 1_000_000


def pull_arrivals(
    path: str, max_messages: int = 100
) -> Generator[tuple[ArrivalEvent | None, bytes], None, None]:
    """Yield (event or None if undecodable, raw data) for every message; acks what was yielded
    after each batch, or when the caller stops taking (``--limit``: the rest is redelivered)."""
    from google.api_core.exceptions import GoogleAPIError

    from obsingest.bus.pull import PubSubPullSource
    from obsingest.errors import BadMessage

    source = PubSubPullSource("", path)  # a full path: no project needed
    yielded: list[str] = []
    try:
        while True:
            for delivery in source.pull(max_messages, timeout=5):
                yielded.append(delivery.ack_id)
                try:
                    event = ArrivalEvent.decode(delivery.data)
                except BadMessage:
                    event = None
                yield event, delivery.data
            source.ack(yielded)
            yielded.clear()
    except GeneratorExit:
        with suppress(GoogleAPIError):  # not acknowledged: shown again by the next tail
            source.ack(yielded)
        raise
    finally:
        source.close()


def run_tail(project: str | None, subscription: str, as_json_lines: bool, limit: int) -> int:
    """Print each new arrival until Ctrl-C or ``limit`` unique ones (0: forever)."""
    from google.api_core import exceptions as api_exceptions

    from infra.local.provision import subscribe
    from obsingest.settings import BusSettings

    bus = BusSettings()
    seen: dict[str, None] = {}
    printed = 0
    with suppress(KeyboardInterrupt):
        while not limit or printed < limit:
            try:  # (again) after the bus went away: an emulator restart takes the subscription
                path = subscribe(project or bus.pubsub_project, bus.arrivals_topic, subscription)
                with closing(pull_arrivals(path)) as arrivals:
                    for event, data in arrivals:
                        printed += _show(event, data, seen, as_json_lines)
                        if limit and printed >= limit:
                            break
            except api_exceptions.GoogleAPIError as exc:  # the bus down or reset: follow on
                print(f"arrivals tail: {type(exc).__name__}: {exc}; subscribing again", file=sys.stderr)
                time.sleep(RESUBSCRIBE_SECONDS)
    return 0


def _show(event: ArrivalEvent | None, data: bytes, seen: dict[str, None], as_json_lines: bool) -> bool:
    """Print ``event`` unless its dataset was shown before (``seen``); whether it was printed."""
    if event is None:
        print(f"undecodable message ({len(data)} bytes)", file=sys.stderr)
        return False
    key = str(event.dataset_id)
    if key in seen:
        return False
    seen[key] = None
    if len(seen) > SEEN_LIMIT:
        seen.pop(next(iter(seen)))
    print(json.dumps(as_json(event)) if as_json_lines else format_line(event), flush=True)
    return True
