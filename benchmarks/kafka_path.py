"""Kafka path benchmark: produce -> assemble -> store, next to Kafka's ProducerPerformance.

Per chunk size: full-size CCDs sent by one ``KafkaChunkSender`` shared by edge threads, assembled
by ``obsingest assembler`` (its own process); each batch paired with a ProducerPerformance run of
the same volume and record size (this machine swings minute to minute), the ratio the median of
paired ratios. Goal: >= 70% at the default chunk size.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, cli, save_result, stack_env
from obsingest.registry.completeness import percentile

CCD_CACHE = ROOT / ".cache" / "bench-kafka-path"
CHUNK_SIZES = (256 * 1024, 1024 * 1024, 4 * 1024 * 1024, 8 * 1024 * 1024)
GOAL_RATIO = 0.70
PARTITIONS = 6
DISTINCT_CCDS = 3
#: Edge threads sharing one sender (an edge node ships many CCDs of an exposure at once)
EDGE_THREADS = 4
MAX_RECORD = 16 * 1024 * 1024
OBS_START = datetime(2026, 11, 22, 3, tzinfo=UTC)
#: ProducerPerformance's client settings, the best tried (batch.size 16 KiB, 1 MiB, 16 MiB);
#: buffer.memory near our librdkafka queue's, or 8 MiB records are throttled by the client's buffer.
PP_BATCH_SIZE = 1024 * 1024
PP_BUFFER_MEMORY = 256 * 1024 * 1024
_PP_STEADY = re.compile(r"(\d+) steady state records sent, ([\d.]+) records/sec")


def _ccds() -> list[bytes]:
    """A few full-size compressed CCDs, generated once and reused."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    CCD_CACHE.mkdir(parents=True, exist_ok=True)
    out = []
    for det in range(DISTINCT_CCDS):
        path = CCD_CACHE / f"LSSTCam_{det:03d}.fits.fz"
        if not path.exists():
            spec = CcdSpec("LSSTCam", 2026112200001, det, 20261122, OBS_START, 30.0, "r", "full")
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(compress_fits(generate_raw_ccd(spec), threads=2))
            tmp.replace(path)
        out.append(path.read_bytes())
    return out


def _delete_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics(names, operation_timeout=30).values():
        try:
            fut.result(30)
        except Exception as exc:
            if "UNKNOWN_TOPIC" not in str(exc):  # a DLQ nobody wrote to was never created
                print(f"  (topic cleanup: {exc})", file=sys.stderr)


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if f'"event":"{event}"' in line]


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark: timed out waiting for {what}")
        time.sleep(0.02)


def _chunked(
    bootstrap: str, ccds: list[bytes], chunk_size: int, per_batch: int, repeats: int, work: Path
) -> dict[str, Any]:
    """Send ``repeats`` batches through one assembler process, measuring each, each followed by
    its paired ProducerPerformance run of the same volume and record size."""
    from functions.assembler.main import command
    from infra.local.provision import create_chunk_topics
    from obsingest.dataid import DataId
    from producers.kafka import KafkaChunkSender, KafkaProducerSettings

    topic = f"bench-chunks-{uuid.uuid4().hex[:10]}"
    create_chunk_topics(bootstrap, {topic: PARTITIONS})
    store = work / f"store-{chunk_size}"
    log = work / f"assembler-{chunk_size}.log"
    argv = command(bootstrap, topic, f"{topic}-dlq", f"{topic}-group", f"file://{store}")
    settings = KafkaProducerSettings(bootstrap_servers=bootstrap, chunk_size=chunk_size)
    sender = KafkaChunkSender(settings, topic, producer_name="bench-edge")
    record = len(_record_for(chunk_size))
    batches: list[dict[str, Any]] = []
    pp_runs: list[float] = []
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: _events(log, "assembler.assigned"), 60, "the assembler to join")
        # warm-up: one CCD through the whole path (connections, idempotence PID, page cache)
        warm = DataId("LSSTCam", 2026112299999, 0)
        sender.send(warm, _as_ccd(ccds[0], warm), datetime.now(UTC))
        _wait(lambda: len(_events(log, "assembler.stored")) >= 1, 60, "the warm-up CCD")
        for batch in range(repeats):
            exposure = 2026112200001 + batch
            ids = [DataId("LSSTCam", exposure, i) for i in range(per_batch)]
            jobs = [(d, _as_ccd(ccds[d.detector % len(ccds)], d)) for d in ids]
            seen = len(_events(log, "assembler.stored"))
            started = datetime.now(UTC)
            with ThreadPoolExecutor(EDGE_THREADS) as pool:
                list(pool.map(lambda j: sender.send(j[0], j[1], datetime.now(UTC)), jobs))
            _wait(
                lambda s=seen: len(_events(log, "assembler.stored")) >= s + per_batch,
                120,
                "the batch to be stored",
            )
            stored = _events(log, "assembler.stored")[seen : seen + per_batch]
            last = max(datetime.fromisoformat(e["ts"]) for e in stored)
            seconds = (last - started).total_seconds()
            total = sum(len(d) for _, d in jobs)
            batches.append(
                {
                    "seconds": seconds,
                    "mb_per_s": total / seconds / 1e6,
                    "latencies": sorted(e["latency_s"] for e in stored),
                    "bytes": total,
                }
            )
            pp_runs.append(_producer_performance(bootstrap, record, total))
    finally:
        proc.terminate()
        proc.wait(30)
        sender.close()
        shutil.rmtree(store, ignore_errors=True)
        _delete_topics(bootstrap, [topic, f"{topic}-dlq"])
    lat = sorted(x for b in batches for x in b["latencies"])
    paired = [b["mb_per_s"] / pp for b, pp in zip(batches, pp_runs, strict=True)]
    return {
        "chunk_size": chunk_size,
        "record_size": record,
        "ccds_per_batch": per_batch,
        "ccd_bytes": statistics.median(len(c) for c in ccds),
        "mb_per_s": statistics.median(b["mb_per_s"] for b in batches),
        "mb_per_s_runs": [round(b["mb_per_s"], 1) for b in batches],
        "latency_p50_s": percentile(lat, 50),
        "latency_p95_s": percentile(lat, 95),
        "latency_max_s": lat[-1],
        "producer_performance_mb_per_s": statistics.median(pp_runs),
        "producer_performance_runs": [round(r, 1) for r in pp_runs],
        "ratio": statistics.median(paired),
        "ratio_runs": [round(r, 3) for r in paired],
    }


def _as_ccd(data: bytes, data_id: Any) -> bytes:
    """A copy of a cached CCD whose header says it is ``data_id`` (the sender names a CCD by it)."""
    from obsingest.dataid import identity_cards
    from producers.transfer.fitsheader import retarget_primary_header

    buf = bytearray(data)
    retarget_primary_header(buf, identity_cards(data_id.identity()))
    return bytes(buf)


def _record_for(chunk_size: int) -> bytes:
    from obsingest.dataid import DataId
    from producers.kafka import encode_chunk, iter_chunks

    data = bytes(chunk_size)
    [first] = iter_chunks(
        DataId("LSSTCam", 2026112200001, 0), data, datetime.now(UTC), None, "bench-edge", chunk_size
    )
    return encode_chunk(first)


def _producer_performance(bootstrap: str, record_size: int, total_bytes: int) -> float:
    """One ProducerPerformance run (same record size and volume, acks=all): its steady-state MB/s."""
    from infra.local.provision import create_chunk_topics
    from infra.local.stack import load_settings

    settings = load_settings()
    java = settings.java_bin() or "java"
    libs = settings.cache_dir / "kafka-4.3.1" / "libs"
    # a warm-up left out of the steady-state line, as our warm-up CCD is left out
    records = max(10, total_bytes // record_size)
    warmup = max(2, records // 4)
    topic = f"bench-pp-{uuid.uuid4().hex[:10]}"
    create_chunk_topics(bootstrap, {topic: PARTITIONS})
    argv = [java, "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance"]
    argv += ["--topic", topic, "--num-records", str(records + warmup)]
    argv += ["--warmup-records", str(warmup), "--record-size", str(record_size)]
    argv += ["--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"]
    argv += [f"max.request.size={MAX_RECORD}", "compression.type=none"]
    argv += [f"batch.size={PP_BATCH_SIZE}", f"buffer.memory={PP_BUFFER_MEMORY}", "linger.ms=2"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    finally:
        _delete_topics(bootstrap, [topic])
    match = _PP_STEADY.findall(out.stdout)
    if not match:
        raise RuntimeError(f"ProducerPerformance printed no summary:\n{out.stdout[-2000:]}")
    _sent, rate = match[-1]
    return float(rate) * record_size / 1e6


def run(repeats: int = 5, ccds: int = 8, chunk_sizes: tuple[int, ...] = CHUNK_SIZES):
    """Measure every chunk size, ``ccds`` CCDs per measured batch; written and returned."""
    from producers.kafka import default_chunk_size

    started = stack_env("kafka")["KAFKA_BOOTSTRAP_SERVERS"]
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or started
    cached = _ccds()
    default = default_chunk_size(MAX_RECORD)
    sweep = []
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        for size in chunk_sizes:
            print(f"chunk size {size // 1024} KiB ...", file=sys.stderr)
            ours = _chunked(bootstrap, cached, size, ccds, repeats, Path(tmp))
            sweep.append(ours)
            print(
                f"  chunked {ours['mb_per_s']:.1f} MB/s, ProducerPerformance "
                f"{ours['producer_performance_mb_per_s']:.1f} MB/s, paired ratio "
                f"{ours['ratio']:.2f}, latency p50 {ours['latency_p50_s']:.3f} s "
                f"p95 {ours['latency_p95_s']:.3f} s",
                file=sys.stderr,
            )
    at_default = next((s for s in sweep if s["chunk_size"] == default), sweep[-1])
    result = {
        "benchmark": "kafka_path",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "bootstrap": bootstrap,
        "partitions": PARTITIONS,
        "repeats": repeats,
        "units": "MB/s = 10**6 bytes/s of compressed CCD bytes (chunked) or record bytes (PP)",
        "method": (
            f"each batch of ours ({ccds} full-size CCDs, 4 edge threads, assembler "
            "process, fsynced local store) is followed at once by one ProducerPerformance run "
            f"of the same volume and record size (acks=all, batch.size={PP_BATCH_SIZE}, "
            f"buffer.memory={PP_BUFFER_MEMORY}); ratio = median of the {repeats} paired ratios"
        ),
        "default_chunk_size": default,
        "goal_ratio": GOAL_RATIO,
        "ratio_at_default": at_default["ratio"],
        "goal_met": at_default["ratio"] >= GOAL_RATIO,
        "sweep": sweep,
    }
    save_result("kafka_path", result)
    return result


if __name__ == "__main__":
    sys.exit(
        cli(
            run,
            lambda r: json.dumps({k: v for k, v in r.items() if k != "sweep"}, indent=2),
            lambda r: r["goal_met"],
        )
    )
