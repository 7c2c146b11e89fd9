"""Open-loop, constant-rate HTTP load generator for the presence benchmark (its second process):
sends the GETs of ``--paths`` (JSON ``[[kind, path], ...]``, cycled) and writes latency
percentiles per kind and overall.

Not wrk: it is closed-loop, so a slow answer delays the requests behind it without counting them
late (coordinated omission); wrk2 is not packaged. Here every latency runs from the request's
*intended* send time, so any lag, the generator's own included, only makes the figures worse.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from obsingest.registry.completeness import percentile


def percentiles(values: list[float]) -> dict[str, float | int]:
    """count, p50/p95/p99/max (milliseconds) of ``values`` (seconds)."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        **{f"p{q}_ms": round(percentile(values, q) * 1000, 3) for q in (50, 95, 99)},
        "max_ms": round(max(values) * 1000, 3),
    }


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _get(conn: Connection, request: bytes) -> int:
    """Send ``request`` on ``conn``, read the whole answer; its status."""
    reader, writer = conn
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def drive(
    url: str, paths: list[tuple[str, str]], rate: float, duration: float, warmup: float
) -> dict[str, Any]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    idle: list[Connection] = []
    opened = 0

    async def connect() -> Connection:
        nonlocal opened
        conn = await asyncio.open_connection(host, port)
        opened += 1
        return conn

    for _ in range(16):
        idle.append(await connect())
    requests = [
        (kind, f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()) for kind, path in paths
    ]
    total = int((warmup + duration) * rate)
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    lags: list[float] = []
    errors: list[str] = []
    pending: set[asyncio.Task[None]] = set()
    # perf_counter, not loop.time(): uvloop's clock ticks in whole milliseconds
    clock = time.perf_counter
    start = clock() + 0.05
    measure_from = start + warmup

    async def one(index: int, intended: float) -> None:
        kind, request = requests[index % len(requests)]
        conn = idle.pop() if idle else None
        try:
            if conn is None:
                conn = await connect()
            if intended >= measure_from:
                lags.append(clock() - intended)
            status = await _get(conn, request)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            conn = None
            status = 0
        done = clock()
        if conn is not None:
            idle.append(conn)
        if intended >= measure_from:
            latencies[kind].append(done - intended)
            statuses[kind][status] += 1

    sent = 0
    while sent < total:
        now = clock()
        # all whose intended time has come: a late wake-up shows as latency, not a shifted schedule
        while sent < total and start + sent / rate <= now:
            task = asyncio.create_task(one(sent, start + sent / rate))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, start + sent / rate - clock()))
    if pending:
        await asyncio.wait(pending, timeout=30)
    elapsed = clock() - measure_from
    measured = sum(len(v) for v in latencies.values())
    return {
        "rate_target_per_s": rate,
        "rate_achieved_per_s": round(measured / elapsed, 1) if elapsed > 0 else 0.0,
        "duration_s": duration,
        "warmup_s": warmup,
        "overall": percentiles([x for v in latencies.values() for x in v]),
        "by_kind": {k: percentiles(v) for k, v in sorted(latencies.items())},
        "statuses": {k: dict(sorted(v.items())) for k, v in sorted(statuses.items())},
        "send_lag": percentiles(lags),
        "connections_opened": opened,
        "errors": len(errors),
        "first_errors": errors[:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--paths", required=True, help="JSON file: [[kind, path], ...]")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    paths = [tuple(p) for p in json.loads(Path(args.paths).read_text())]
    import uvloop

    started = time.perf_counter()
    result = uvloop.run(drive(args.url, paths, args.rate, args.duration, args.warmup))  # type: ignore[arg-type]
    result["wall_s"] = round(time.perf_counter() - started, 2)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
