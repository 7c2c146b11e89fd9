"""Every Prometheus metric of the pipeline, defined once, and the helpers that expose them.

One catalogue so names, units, labels and buckets cannot drift between processes, the alert rules
and the dashboard (unit tests check both against ``CATALOGUE``). Every label takes values from a
closed set (``LABEL_VALUES``); anything else is recorded as ``other`` and logged once, so no input
mints unbounded series. Worker pools report to their parent, which records: no multiprocess
mode, do not set ``PROMETHEUS_MULTIPROC_DIR``. Only this and ``metrics_http`` import
prometheus_client eagerly. One cohesive concept, hence its length: the catalogue.
"""

from __future__ import annotations

import itertools
import logging
import platform
import threading
import time
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info

from obsingest import errors

log = logging.getLogger("obsingest.metrics")

#: readout -> stored / registered / announced: the observatory's SLA-aligned buckets plus
#: sub-second ones (the budget is 5 s per CCD; later than 30 s counts as late).
LATENCY_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 25, 30, 45, 60)
#: registry operations and presence API requests: milliseconds to seconds.
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

OTHER = "other"

#: Which CCD outcomes each component counts (``obsingest_ccds_total``).
COMPONENT_OUTCOMES: dict[str, frozenset[str]] = {
    "edge": frozenset({"seen", "compressed", "sent", "acknowledged", "refused", "quarantined", "retried"}),
    "assembler": frozenset({"stored", "duplicate", "quarantined", "dead_lettered"}),
    "relay": frozenset({"delivered", "retried", "dead_lettered", "redriven"}),
    "register": frozenset({"registered", "duplicate", "quarantined", "ignored", "retried"}),
    "reconcile": frozenset({"registered", "missing_object"}),
}

#: What each component counts besides CCD outcomes (``obsingest_service_counts_total``): the
#: counts its ``/health``, ``obsingest status``, benchmarks and tests read, kept nowhere else.
COMPONENT_COUNTS: dict[str, frozenset[str]] = {
    "reconcile": frozenset(
        {"passes", "failed_passes", "objects_listed", "missing_found", "repairs"}
        | {"quarantined_by_reconcile", "reconcile_failures", "canary_write_failures"}
        | {"outbox_published", "exposures_ingested", "exposures_incomplete"}
        | {"full_sweeps", "incremental_passes"}
    ),
    "assembler": frozenset({"records", "bytes", "ignored", "recovered"}),
    "relay": frozenset({"pulled"}),
    "edge": frozenset(
        {"resumed", "duplicates", "worker_crashes", "over_budget", "raw_bytes", "sent_bytes"}
        | {f"acked_{status}" for status in ("stored", "exists", "conflict", "acked")}
    ),
}

#: Reasons that are no error class's: the relay's push failures by class (the full answer is in
#: the dead letter's attributes: its start -> the label) and an object a producer parked without
#: saying why.
_PUSH_FAILURE_LABELS = {"HTTP 4": "http-4xx", "HTTP 5": "http-5xx", "no response": "no-response"}
PUSH_FAILURES = tuple(_PUSH_FAILURE_LABELS.values())
errors.REASONS.update({*PUSH_FAILURES, "quarantined-by-producer"})
#: Every ``reason`` a quarantine, dead letter or registry error can carry: ``errors.REASONS``
#: itself, growing as a unit's error modules are imported (bounded by the code, under 100).
REASONS = errors.REASONS

_COMPONENTS = (*COMPONENT_OUTCOMES, "presence")
#: The closed set of values of every label in the catalogue (``other`` is always allowed).
LABEL_VALUES: dict[str, AbstractSet[str]] = {
    "component": frozenset(_COMPONENTS),
    "outcome": frozenset().union(*COMPONENT_OUTCOMES.values()),
    "reason": REASONS,
    "transport": frozenset({"direct", "kafka"}),
    "instrument": frozenset({"LSSTCam", "LSSTComCam", "LATISS"}),
    "stage": frozenset({"compress", "send"}),
    "state": frozenset({"seen", "compressed", "sent", "acknowledged", "quarantined"}),
    "refusal": frozenset({"spool-full", "spool-unavailable", "source-unreadable"}),
    "operation": frozenset({"register", "quarantine", "query"}),
    "event": frozenset({"written", "seen"}),
    "source": frozenset({"notifications", "chunks"}),
    "result": frozenset({"redriven", "failed", "skipped"}),
    "status": frozenset({"ok", "over_budget", "incomplete"}),
    "route": frozenset({"ccd", "dataset", "exposure", "night", "health", "openapi"}),
    "code": frozenset({"2xx", "3xx", "4xx", "5xx"}),
    "counter": frozenset().union(*COMPONENT_COUNTS.values()),
}
#: Labels whose one value per process is fixed at start-up (build info), not a closed set.
CONSTANT_LABELS = frozenset({"version", "python_version"})
#: Never labels: unbounded, and they belong in logs and the registry.
FORBIDDEN_LABELS = frozenset(
    {"data_id", "dataset_id", "object", "object_name", "uri", "exposure", "detector", "ccd"}
    | {"path", "message", "error"}
)
#: register closes an exposure on its last CCD; reconcile closes it at its deadline
_CLOSERS = ("register", "reconcile")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: exposed ``name`` (counters with ``_total``, info with ``_info``)."""

    name: str
    kind: str  # counter | gauge | histogram | info
    help: str
    labels: tuple[str, ...] = ()
    exported_by: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


#: The catalogue as a table, one metric a paragraph: ``name kind labels exported_by`` (comma
#: lists, ``-`` for none, ``*`` for every component; a histogram's kind names its buckets,
#: ``histogram:latency`` or ``histogram:fast``), then its help text on indented lines.
_TABLE = """
obsingest_ccds_total counter component,outcome edge,assembler,relay,register,reconcile
  CCDs by outcome per component (COMPONENT_OUTCOMES lists each one's outcomes).
obsingest_service_counts_total counter component,counter edge,assembler,relay,reconcile
  What a component counts besides CCD outcomes (passes, records, ...), by component and
  counter (COMPONENT_COUNTS lists each one's).
obsingest_ccds_quarantined_total counter component,reason edge,assembler,register
  CCDs (or messages) quarantined, by component and reason.
obsingest_ccds_retried_total counter component,reason edge
  Failed attempts that will be retried, by component and reason (the edge's).
obsingest_ccds_dead_lettered_total counter component,reason assembler,relay
  Messages dead-lettered after their retries, by component and reason.
obsingest_readout_to_stored_seconds histogram:latency transport,instrument register
  End of readout -> object stored (the object's creation time), any transport.
obsingest_readout_to_registered_seconds histogram:latency transport,instrument register
  End of readout -> dataset registered.
obsingest_readout_to_announced_seconds histogram:latency transport,instrument register
  End of readout -> ArrivalEvent published.
obsingest_edge_stage_seconds histogram:latency stage edge
  Time an edge worker spends per CCD in one stage (compress, send).
obsingest_edge_spool_ccds gauge state edge
  CCDs in the edge journal, by journal state.
obsingest_edge_oldest_unacknowledged_age_seconds gauge - edge
  Age since readout of the oldest CCD not yet acknowledged (0 when none).
obsingest_edge_spool_free_bytes gauge - edge
  Free bytes on the spool's file system.
obsingest_edge_refusing_new_work gauge refusal edge
  1 while the edge refuses new CCDs, by refusal reason; 0 otherwise.
obsingest_assembler_consumer_lag_messages gauge - assembler
  Chunk records behind the partitions' high watermarks (sum over assigned ones).
obsingest_assembler_open_files gauge - assembler
  CCDs being reassembled (some chunks held, not yet stored).
obsingest_assembler_held_payload_bytes gauge - assembler
  Chunk payload bytes held in memory by open files.
obsingest_assembler_held_payload_limit_bytes gauge - assembler
  The configured bound on held payload bytes.
obsingest_registry_operation_seconds histogram:fast operation register,reconcile,presence
  Registry operation latency, by operation.
obsingest_registry_errors_total counter operation,reason register,reconcile,presence
  Registry operations that raised, by operation and reason.
obsingest_resource_exhausted_total counter component,reason edge,register
  Attempts that failed because a resource ran out (disk, quota, rate, connection slots,
  memory), by component and reason: outages, retried, never quarantined.
obsingest_notification_canaries_total counter event reconcile
  Canary objects written, and their notifications seen.
obsingest_notification_canary_last_seen_timestamp_seconds gauge - reconcile
  Unix time the last canary notification was seen (process start before the first).
obsingest_notification_canary_age_seconds gauge - reconcile
  Seconds since the last canary notification was seen (NaN before the first).
obsingest_dead_letters_waiting gauge source relay,assembler
  Dead-lettered messages waiting for redrive, by source.
obsingest_redrive_attempts_total counter source,result relay,assembler
  Dead letters redriven, by source and result.
obsingest_exposures_completed_total counter instrument,status register,reconcile
  Exposures closed, by status (ok, over_budget, incomplete at its deadline).
obsingest_last_exposure_max_latency_seconds gauge instrument register,reconcile
  Max readout -> announced latency of the last closed exposure.
obsingest_last_exposure_missing_ccds gauge instrument register,reconcile
  Expected CCDs missing from the last closed exposure.
obsingest_last_exposure_completed_timestamp_seconds gauge instrument register,reconcile
  Unix time the last exposure was closed.
obsingest_header_warnings_total counter instrument register,reconcile
  Warnings translating raw headers (an empty card defaulted, a value unusable), by
  instrument; the registry's exposure record keeps their text.
obsingest_presence_requests_total counter route,code presence
  Presence API requests, by route and status class.
obsingest_presence_request_seconds histogram:fast route presence
  Presence API request latency, by route.
obsingest_build_info info component,version,python_version *
  obsingest version and Python of this process, and which component it runs.
"""


def _catalogue(table: str) -> tuple[MetricSpec, ...]:
    """``_TABLE``'s specs, read at import: a malformed row fails the import (and every test)."""
    rows: list[tuple[list[str], list[str]]] = []
    for line in table.strip().splitlines():
        if line.startswith(" "):
            rows[-1][1].append(line.strip())
        else:
            rows.append((line.split(), []))
    specs = []
    for (name, kind, labels, exported_by), help_lines in rows:
        kind, _, buckets = kind.partition(":")
        specs.append(
            MetricSpec(
                name,
                kind,
                " ".join(help_lines),
                () if labels == "-" else tuple(labels.split(",")),
                tuple(_COMPONENTS if exported_by == "*" else exported_by.split(",")),
                {"latency": LATENCY_BUCKETS, "fast": FAST_BUCKETS}.get(buckets, ()),
            )
        )
    return tuple(specs)


CATALOGUE: tuple[MetricSpec, ...] = _catalogue(_TABLE)


def reason_label(reason: str) -> str:
    """The ``reason`` label for an error reason or a relay push failure (``HTTP 503: ...``)."""
    if reason in REASONS:
        return reason
    return next((label for start, label in _PUSH_FAILURE_LABELS.items() if reason.startswith(start)), OTHER)


def _create(spec: MetricSpec, registry: CollectorRegistry) -> Any:
    """The family; prometheus_client adds a counter's ``_total`` and an info's ``_info``."""
    name = spec.name.removesuffix("_total").removesuffix("_info")
    if spec.kind == "histogram":
        return Histogram(name, spec.help, spec.labels, registry=registry, buckets=spec.buckets)
    if spec.kind == "info":  # its labels are the info's keys, no series labels
        return Info(name, spec.help, registry=registry)
    return {"counter": Counter, "gauge": Gauge}[spec.kind](name, spec.help, spec.labels, registry=registry)


class Metrics:
    """The catalogue registered in one ``CollectorRegistry``, with checked recording methods."""

    def __init__(self, registry: CollectorRegistry | None = None, *, strict: bool = False) -> None:
        self.registry = REGISTRY if registry is None else registry
        self.strict = strict
        self._families = {spec.name: _create(spec, self.registry) for spec in CATALOGUE}
        self._warned: set[tuple[str, str]] = set()
        self._canary_last_seen: float | None = None
        self._families["obsingest_notification_canary_age_seconds"].set_function(self._canary_age)

    def _value(self, label: str, value: str) -> str:
        allowed = LABEL_VALUES[label]
        if value in allowed or value == OTHER:
            return value
        if self.strict:
            raise ValueError(f"metric label {label}={value!r} is not one of {sorted(allowed)}")
        if (label, value) not in self._warned and len(self._warned) < 256:  # bounded memory
            self._warned.add((label, value))
            log.warning("metrics.label_outside_set", extra={"label": label, "value": value[:200]})
        return OTHER

    def _child(self, name: str, **labels: str) -> Any:
        checked = {k: self._value(k, v) for k, v in labels.items()}
        return self._families[name].labels(**checked)

    def ccd(self, component: str, outcome: str, reason: str | None = None, n: int = 1) -> None:
        """Count ``n`` CCDs with an outcome; quarantines and dead letters also by reason."""
        component = self._value("component", component)
        outcome = self._value("outcome", outcome)
        if outcome not in COMPONENT_OUTCOMES.get(component, ()) and outcome != OTHER:
            if self.strict:
                raise ValueError(f"component {component!r} has no outcome {outcome!r}")
            outcome = OTHER
        self._child("obsingest_ccds_total", component=component, outcome=outcome).inc(n)
        if outcome in ("quarantined", "dead_lettered") or (outcome == "retried" and reason):
            name = f"obsingest_ccds_{outcome}_total"
            self._child(name, component=component, reason=reason_label(reason or "error")).inc(n)

    def counter(self, component: str, name: str) -> Any:
        """The prometheus_client child of one of a component's own counts (``COMPONENT_COUNTS``),
        to ``inc()`` on a hot path without the label checks of every call."""
        return self._child("obsingest_service_counts_total", component=component, counter=name)

    def add(self, component: str, name: str, n: float = 1) -> None:
        """Count ``n`` of one of a component's own counts (``COMPONENT_COUNTS``)."""
        if n:
            self.counter(component, name).inc(n)

    def value(self, name: str, **labels: str) -> float:
        """A sample's current value in this registry (0 before its series exists): how
        ``/health``, ``obsingest status``, benchmarks and tests read the counters."""
        return self.registry.get_sample_value(name, labels) or 0.0

    def count(self, component: str, name: str) -> int:
        """A component's count: a CCD outcome (``obsingest_ccds_total``) or one of its own."""
        if name in COMPONENT_OUTCOMES.get(component, ()):
            return int(self.value("obsingest_ccds_total", component=component, outcome=name))
        return int(self.value("obsingest_service_counts_total", component=component, counter=name))

    def by_label(self, name: str, label: str, **labels: str) -> dict[str, int]:
        """``name``'s non-zero values by one ``label``, over the series that match ``labels``."""
        out: dict[str, int] = {}
        for family in self.registry.collect():
            for s in family.samples:
                if s.name == name and s.value and labels.items() <= s.labels.items():
                    out[s.labels[label]] = out.get(s.labels[label], 0) + int(s.value)
        return out

    def exhausted(self, component: str, reason: str) -> None:
        """Count one attempt that failed because a resource ran out (its ``reason``)."""
        name, label = "obsingest_resource_exhausted_total", reason_label(reason)
        self._child(name, component=component, reason=label).inc()

    def readout_latency(self, stage: str, seconds: float, transport: str, instrument: str) -> None:
        """Observe readout -> ``stage`` (stored, registered or announced) for one CCD."""
        name = f"obsingest_readout_to_{stage}_seconds"
        self._child(name, transport=transport, instrument=instrument).observe(seconds)

    def edge_stage(self, stage: str, seconds: float) -> None:
        self._child("obsingest_edge_stage_seconds", stage=stage).observe(seconds)

    def edge_spool(
        self,
        depths: Mapping[str, int],
        oldest_unacknowledged_age_seconds: float,
        free_bytes: int,
        refusing: str | None = None,
    ) -> None:
        """Set the spool gauges; states missing from ``depths`` are 0, as are other refusals."""
        for state in LABEL_VALUES["state"]:
            self._child("obsingest_edge_spool_ccds", state=state).set(depths.get(state, 0))
        f = self._families
        f["obsingest_edge_oldest_unacknowledged_age_seconds"].set(oldest_unacknowledged_age_seconds)
        f["obsingest_edge_spool_free_bytes"].set(free_bytes)
        current = self._value("refusal", refusing) if refusing else None
        for refusal in LABEL_VALUES["refusal"] | ({current} if current else set()):
            self._child("obsingest_edge_refusing_new_work", refusal=refusal).set(int(refusal == current))

    def assembler_state(
        self, lag_messages: int, open_files: int, held_payload_bytes: int, held_limit_bytes: int
    ) -> None:
        f = self._families
        f["obsingest_assembler_consumer_lag_messages"].set(lag_messages)
        f["obsingest_assembler_open_files"].set(open_files)
        f["obsingest_assembler_held_payload_bytes"].set(held_payload_bytes)
        f["obsingest_assembler_held_payload_limit_bytes"].set(held_limit_bytes)

    def dead_letters_waiting(self, source: str, count: int) -> None:
        self._child("obsingest_dead_letters_waiting", source=source).set(count)

    def redrive(self, source: str, result: str, n: int = 1) -> None:
        self._child("obsingest_redrive_attempts_total", source=source, result=result).inc(n)

    @contextmanager
    def registry_operation(self, operation: str) -> Iterator[None]:
        """Time a registry call; an exception is counted by its ``reason`` and re-raised."""
        started = time.perf_counter()
        try:
            yield
        except Exception as exc:
            reason = reason_label(getattr(exc, "reason", "error"))
            self._child("obsingest_registry_errors_total", operation=operation, reason=reason).inc()
            raise
        finally:
            self._child("obsingest_registry_operation_seconds", operation=operation).observe(
                time.perf_counter() - started
            )

    def canary(self, event: str, at: float | None = None) -> None:
        """A canary object ``written``, or its notification ``seen`` (at Unix time ``at``)."""
        event = self._value("event", event)
        self._child("obsingest_notification_canaries_total", event=event).inc()
        if event == "seen":
            self._canary_seen(time.time() if at is None else at)

    def _canary_seen(self, at: float) -> None:
        self._canary_last_seen = at
        self._families["obsingest_notification_canary_last_seen_timestamp_seconds"].set(at)

    def _canary_age(self) -> float:
        seen = self._canary_last_seen
        return float("nan") if seen is None else max(0.0, time.time() - seen)

    def exposure_completed(
        self,
        instrument: str,
        status: str,
        max_latency_seconds: float,
        missing_ccds: int = 0,
        at: float | None = None,
    ) -> None:
        """One exposure closed: counted by status; the ``last_exposure`` gauges follow it."""
        name = "obsingest_exposures_completed_total"
        self._child(name, instrument=instrument, status=status).inc()
        for name, value in (
            ("obsingest_last_exposure_max_latency_seconds", max_latency_seconds),
            ("obsingest_last_exposure_missing_ccds", missing_ccds),
            ("obsingest_last_exposure_completed_timestamp_seconds", at or time.time()),
        ):
            self._child(name, instrument=instrument).set(value)

    def header_warnings(self, instrument: str, n: int) -> None:
        """``n`` warnings translating one CCD's header (``obsingest.translate``)."""
        if n:
            self._child("obsingest_header_warnings_total", instrument=instrument).inc(n)

    def presence_request(self, route: str, status_code: int, seconds: float) -> None:
        code = f"{status_code // 100}xx" if 200 <= status_code <= 599 else OTHER
        self._child("obsingest_presence_requests_total", route=route, code=code).inc()
        self._child("obsingest_presence_request_seconds", route=route).observe(seconds)

    def start(self, component: str) -> None:
        """Call once at process start: build info, and this component's series created at 0,
        so ``rate()`` sees their first increment; reconcile's canary clock starts now."""
        from importlib.metadata import PackageNotFoundError, version

        component = self._value("component", component)
        try:
            ours = version("obsingest")
        except PackageNotFoundError:
            ours = "unknown"
        self._families["obsingest_build_info"].info(
            {"component": component, "version": ours, "python_version": platform.python_version()}
        )
        for outcome in COMPONENT_OUTCOMES.get(component, ()):
            self._child("obsingest_ccds_total", component=component, outcome=outcome)
        for name in COMPONENT_COUNTS.get(component, ()):
            self.counter(component, name)
        if component in _CLOSERS:
            for instrument, status in itertools.product(LABEL_VALUES["instrument"], LABEL_VALUES["status"]):
                self._child("obsingest_exposures_completed_total", instrument=instrument, status=status)
        if component == "reconcile" and self._canary_last_seen is None:
            self._canary_seen(time.time())


_default: Metrics | None = None
_default_lock = threading.Lock()


def private_metrics() -> Metrics:
    """The catalogue in a registry of its own: a service instance's default, so that several
    in one process (tests) count apart; deployments pass ``get_metrics()``."""
    return Metrics(CollectorRegistry())


def get_metrics() -> Metrics:
    """The process-wide catalogue on prometheus_client's default registry (created once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Metrics()
        return _default
