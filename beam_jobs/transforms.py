"""The one pipeline definition, per-exposure summaries from manifests and arrivals:
:class:`ExposureSummaries` serves batch (a lifted CombinePerKey fold) and streaming
(:class:`ExposureStateFn`), both through :func:`beam_jobs.core.summarize_exposure`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import PickleCoder, StrUtf8Coder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from beam_jobs.core import (
    TRIGGER_ALL_ARRIVED,
    TRIGGER_BATCH,
    TRIGGER_DEADLINE,
    TRIGGER_LATE,
    Arrival,
    ExposureKey,
    is_breach,
    manifest_key,
    same_content,
    summarize_exposure,
    to_micros,
)
from obsingest import defaults
from obsingest.errors import BadMessage
from obsingest.logs import get_logger, log_event
from obsingest.messages import ArrivalEvent, ExposureManifest, ExposureSummary

log = get_logger("beam_jobs")

SUMMARIES = "summaries"
ALERTS = "alerts"
BAD = "bad"
LATE = "late"

MANIFEST = "m"
ARRIVAL = "a"
#: the exposure of a batch input's dead-letter element (``sources.bad_input``): its key's string
#: is the dead-letter line, and the fold passes it to the ``bad`` output
BAD_INPUT = -1

NAMESPACE = "obsingest.beam"
#: a manifest's exposure time beyond this (a night) is bad input: its deadline is no timestamp
LONGEST_EXPOSURE = 86_400.0
#: an event time further than this after the element's publication (a readout after its CCD was
#: announced, a shutter opening after its manifest) is bad input, not a deadline to wait for
LONGEST_LEAD = 86_400.0
#: how long an exposure whose state expired is remembered (one key, one int): what comes for it
#: meanwhile is late, dead-lettered, not summarised again from nothing. A night: the longest outage
#: whose backlog must still be told apart.
EXPIRED_MEMORY = 86_400.0

#: (instrument, exposure) -> (kind, payload); the type hint gives the stateful DoFn and the
#: CombinePerKey a deterministic key coder.
KeyedElement = typehints.Tuple[typehints.Tuple[str, int], typehints.Any]


@dataclass(frozen=True)
class SummaryConfig:
    """Budget and timing policy of the summaries (seconds)."""

    #: per-CCD budget, readout -> published
    budget: float = defaults.BUDGET_SECONDS
    #: extra wait after first readout + budget before a summary is forced out
    grace: float = 5.0
    #: how long after the deadline late arrivals still revise the summary; state is then dropped
    allowed_lateness: float = 600.0


def with_event_time(element: ExposureManifest | Arrival) -> TimestampedValue:
    """Event time = readout time for arrivals, shutter open (obs_start) for manifests."""
    micros = element.readout_us if isinstance(element, Arrival) else to_micros(element.obs_start)
    return TimestampedValue(element, Timestamp(micros=micros))


class DecodeMessages(beam.DoFn):
    """Single-object-encoded Avro message bodies -> Arrival / ExposureManifest, stamped with
    event time. Undecodable messages go to the ``bad`` output as (body, reason) — logged,
    counted, dead-lettered by the streaming job — and never crash or stall it."""

    def __init__(self, contract: str) -> None:
        self.contract = contract
        self.bad = Metrics.counter(NAMESPACE, f"bad_{contract}")

    def process(self, message: bytes) -> Iterator[Any]:
        try:
            if not isinstance(message, bytes):  # a Kafka record without a value
                raise BadMessage(f"message body is {type(message).__name__}, not bytes")
            if self.contract == ArrivalEvent.SCHEMA:
                event = ArrivalEvent.decode(message)
                what = f"ArrivalEvent {event.dataset_id} of exposure {event.exposure}"
                _not_ahead(event.readout_time, event.published_time, f"{what}: readout_time")
                element: Any = Arrival.from_event(event)
            else:
                element = ExposureManifest.decode(message)
                what = f"ExposureManifest of exposure {element.exposure}"
                if not 0 <= element.exposure_time <= LONGEST_EXPOSURE:  # NaN too: no deadline
                    raise BadMessage(
                        f"{what}: exposure_time {element.exposure_time!r} is not within "
                        f"0..{LONGEST_EXPOSURE:g} s"
                    )
                _not_ahead(element.obs_start, element.published, f"{what}: obs_start")
        except BadMessage as exc:
            self.bad.inc()
            log_event(log, "bad_message", logging.WARNING, contract=self.contract, reason=str(exc))
            body = message if isinstance(message, bytes) else b""
            yield beam.pvalue.TaggedOutput(BAD, (body, f"{self.contract}: {exc}"))
            return
        yield with_event_time(element)


def _not_ahead(event_time: datetime, published: datetime, what: str) -> None:
    """BadMessage when an event time is more than :data:`LONGEST_LEAD` after the element's own
    publication: its deadline would hold its exposure's state, unsummarised, until then."""
    if event_time - published > timedelta(seconds=LONGEST_LEAD):
        raise BadMessage(
            f"{what} {event_time.isoformat()} is more than {LONGEST_LEAD:g} s after its "
            f"publication ({published.isoformat()})"
        )


def key_manifest(manifest: ExposureManifest) -> tuple[ExposureKey, tuple[str, Any]]:
    return (manifest_key(manifest), (MANIFEST, manifest))


def key_arrival(arrival: tuple) -> tuple[ExposureKey, tuple[str, Any]]:
    """An ``Arrival`` or its plain tuple, keyed: (instrument, exposure) are its fields 1 and 2."""
    return ((arrival[1], arrival[2]), (ARRIVAL, tuple(arrival)))


class FoldExposure(beam.CombineFn):
    """Batch: fold one exposure into [earliest manifest, best arrival per detector] (``dedupe``'s
    reduction) before the shuffle, so one accumulator per exposure crosses it. Mutated in place."""

    def create_accumulator(self) -> list[Any]:
        return [None, {}]

    def add_input(self, acc: list[Any], element: tuple[str, Any]) -> list[Any]:
        # Per detector the lowest (published_us, dataset_id, readout_us) counts; written out
        # here, not as a function: this runs once per event.
        kind, payload = element
        if kind != ARRIVAL:
            if kind == MANIFEST and (acc[0] is None or payload.published < acc[0].published):
                acc[0] = payload
            return acc  # bad input: its key says it all
        best: dict[int, tuple] = acc[1]
        detector = payload[3]
        current = best.get(detector)
        if current is None or (payload[6], payload[0], payload[5]) < (current[6], current[0], current[5]):
            best[detector] = payload
        return acc

    def merge_accumulators(self, accumulators: Iterable[list[Any]]) -> list[Any]:
        # The others are merged into the first (Beam allows mutating the first one only).
        rest = iter(accumulators)
        merged = next(rest, None) or self.create_accumulator()
        for manifest, best in rest:
            if manifest is not None:
                self.add_input(merged, (MANIFEST, manifest))
            for payload in best.values():
                self.add_input(merged, (ARRIVAL, payload))
        return merged

    def extract_output(self, acc: list[Any]) -> list[Any]:
        return acc


class SummarizeGroupFn(beam.DoFn):
    """(key, folded exposure) -> its ExposureSummary, trigger ``batch``."""

    def __init__(self, config: SummaryConfig) -> None:
        self.config = config
        self.unexpected = Metrics.counter(NAMESPACE, "unexpected_detector_arrivals")

    def process(self, element: tuple[ExposureKey, list[Any]]) -> Iterator[Any]:
        key, (manifest, best) = element
        if key[1] == BAD_INPUT:
            yield beam.pvalue.TaggedOutput(BAD, key[0])
            return
        arrivals = [Arrival(*payload) for payload in best.values()]
        summary = summarize_exposure(manifest, arrivals, self.config.budget, key=key, trigger=TRIGGER_BATCH)
        yield from _emit(summary, manifest, arrivals, self.unexpected)


def _emit(
    summary: ExposureSummary,
    manifest: ExposureManifest | None,
    arrivals: list[Arrival],
    unexpected_counter: Any,
) -> Iterator[Any]:
    about = {"instrument": summary.instrument, "exposure": summary.exposure}
    if manifest is not None:
        extra = sorted({a.detector for a in arrivals} - set(manifest.detectors))
        if extra:
            unexpected_counter.inc(len(extra))
            log_event(log, "unexpected_detectors", logging.WARNING, **about, detectors=extra)
    how = {"status": summary.status, "revision": summary.revision, "trigger": summary.trigger}
    log_event(log, "exposure_summary", logging.DEBUG, **about, **how)
    yield summary
    if is_breach(summary):
        yield beam.pvalue.TaggedOutput(ALERTS, summary)


ARRIVAL_CODER = TupleCoder([StrUtf8Coder(), StrUtf8Coder()] + [VarIntCoder() for _ in range(5)])


def deadline_micros(manifest: ExposureManifest | None, arrivals: list[Arrival], config: SummaryConfig) -> int:
    """first readout + budget + grace; before any arrival, the expected readout (obs_start +
    exposure time) stands in for the first readout so a manifest alone still times out."""
    if arrivals:
        anchor = min(a.readout_us for a in arrivals)
    elif manifest is not None:
        anchor = to_micros(manifest.obs_start) + round(manifest.exposure_time * 1e6)
    else:
        raise ValueError("no manifest and no arrivals")
    return anchor + round((config.budget + config.grace) * 1e6)


class ExposureStateFn(beam.DoFn):
    """Holds one exposure's manifest and arrivals (early arrivals too) until it can be
    summarized: revision 0 at ``all-arrived`` or ``deadline``, revision + 1 for each later change
    (``late-arrival``), state dropped at deadline + allowed lateness, the exposure remembered as
    expired for :data:`EXPIRED_MEMORY` more, its elements meanwhile to ``late`` (beam_jobs/README.md)."""

    MANIFEST_STATE = ReadModifyWriteStateSpec("manifest", PickleCoder())
    ARRIVALS_STATE = BagStateSpec("arrivals", ARRIVAL_CODER)
    EMITTED_STATE = ReadModifyWriteStateSpec("emitted", PickleCoder())
    DEADLINE_STATE = ReadModifyWriteStateSpec("deadline", VarIntCoder())
    #: (revision of its last summary, when it is forgotten) of an exposure whose state expired
    EXPIRED_STATE = ReadModifyWriteStateSpec("expired", TupleCoder([VarIntCoder(), VarIntCoder()]))
    TIMER = TimerSpec("deadline", TimeDomain.WATERMARK)

    def __init__(self, config: SummaryConfig) -> None:
        self.config = config
        self.unexpected = Metrics.counter(NAMESPACE, "unexpected_detector_arrivals")
        self.revisions = Metrics.counter(NAMESPACE, "revisions")
        self.collected = Metrics.counter(NAMESPACE, "exposures_garbage_collected")
        self.late = Metrics.counter(NAMESPACE, "late_events")
        self.summarize = functools.partial(summarize_exposure, budget=config.budget)
        self.lateness_us = round(config.allowed_lateness * 1e6)
        self.memory_us = round(EXPIRED_MEMORY * 1e6)

    def process(
        self,
        element: tuple[ExposureKey, tuple[str, Any]],
        manifest_state: Any = beam.DoFn.StateParam(MANIFEST_STATE),
        arrivals_state: Any = beam.DoFn.StateParam(ARRIVALS_STATE),
        emitted_state: Any = beam.DoFn.StateParam(EMITTED_STATE),
        deadline_state: Any = beam.DoFn.StateParam(DEADLINE_STATE),
        expired_state: Any = beam.DoFn.StateParam(EXPIRED_STATE),
        timer: Any = beam.DoFn.TimerParam(TIMER),
    ) -> Iterator[Any]:
        key, (kind, payload) = element
        expired = expired_state.read()
        if expired is not None:
            yield self._late(key, kind, payload, expired[0])
            return
        if kind == MANIFEST:
            held = manifest_state.read()
            if held is not None and held.published <= payload.published:
                return
            manifest_state.write(payload)
        else:
            arrivals_state.add(tuple(payload))
        manifest = manifest_state.read()
        arrivals = [Arrival(*t) for t in arrivals_state.read()]
        emitted: ExposureSummary | None = emitted_state.read()
        if emitted is not None:
            revision = emitted.revision + 1
            revised = self.summarize(manifest, arrivals, key=key, revision=revision, trigger=TRIGGER_LATE)
            if not same_content(revised, emitted):
                self.revisions.inc()
                emitted_state.write(revised)
                yield from _emit(revised, manifest, arrivals, self.unexpected)
            return
        deadline = deadline_micros(manifest, arrivals, self.config)
        if manifest is not None and set(manifest.detectors) <= {a.detector for a in arrivals}:
            summary = self.summarize(manifest, arrivals, key=key, trigger=TRIGGER_ALL_ARRIVED)
            emitted_state.write(summary)
            deadline_state.write(deadline)
            timer.set(Timestamp(micros=deadline + self.lateness_us))
            yield from _emit(summary, manifest, arrivals, self.unexpected)
            return
        if deadline_state.read() != deadline:
            deadline_state.write(deadline)
            timer.set(Timestamp(micros=deadline))

    @on_timer(TIMER)
    def on_deadline(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        manifest_state: Any = beam.DoFn.StateParam(MANIFEST_STATE),
        arrivals_state: Any = beam.DoFn.StateParam(ARRIVALS_STATE),
        emitted_state: Any = beam.DoFn.StateParam(EMITTED_STATE),
        deadline_state: Any = beam.DoFn.StateParam(DEADLINE_STATE),
        expired_state: Any = beam.DoFn.StateParam(EXPIRED_STATE),
        timer: Any = beam.DoFn.TimerParam(TIMER),
    ) -> Iterator[Any]:
        # A runner may deliver a firing again after the timer was set anew (the DirectRunner
        # does): one before what is due only sets the timer again.
        expired = expired_state.read()
        if expired is not None:
            if fired.micros < expired[1]:
                timer.set(Timestamp(micros=expired[1]))
            else:
                expired_state.clear()  # its memory ends: what comes now opens new state
            return
        emitted: ExposureSummary | None = emitted_state.read()
        if emitted is not None:
            collect_at = deadline_state.read() + self.lateness_us
            if fired.micros < collect_at:
                timer.set(Timestamp(micros=collect_at))
                return
            for state in (manifest_state, arrivals_state, emitted_state, deadline_state):
                state.clear()
            forget_at = collect_at + self.memory_us
            expired_state.write((emitted.revision, forget_at))
            timer.set(Timestamp(micros=forget_at))
            self.collected.inc()
            log_event(log, "exposure_state_collected", instrument=key[0], exposure=key[1])
            return
        manifest = manifest_state.read()
        arrivals = [Arrival(*t) for t in arrivals_state.read()]
        if manifest is None and not arrivals:
            return  # a timer of state that was already collected: nothing to report
        summary = self.summarize(manifest, arrivals, key=tuple(key), trigger=TRIGGER_DEADLINE)
        emitted_state.write(summary)
        timer.set(Timestamp(micros=fired.micros + self.lateness_us))
        yield from _emit(summary, manifest, arrivals, self.unexpected)

    def _late(self, key: ExposureKey, kind: str, payload: Any, revision: int) -> Any:
        """An element for an expired exposure -> ``late`` as (body, reason): a manifest's own
        encoding, an arrival's fields as JSON (all the job keeps of it)."""
        if kind == MANIFEST:
            what, body = "ExposureManifest", payload.encode()
        else:
            arrival = Arrival(*payload)
            what = f"ArrivalEvent {arrival.dataset_id} (detector {arrival.detector})"
            body = json.dumps(arrival._asdict()).encode()
        reason = (
            f"late: {what} of {key[0]} exposure {key[1]} came after its summary (revision {revision}) "
            f"expired at deadline + allowed lateness ({self.config.allowed_lateness:g} s): not "
            "summarised again"
        )
        self.late.inc()
        log_event(log, "late_event", logging.WARNING, instrument=key[0], exposure=key[1], reason=reason)
        return beam.pvalue.TaggedOutput(LATE, (body, reason))


class ExposureSummaries(beam.PTransform):
    """Manifests and arrivals -> DoOutputsTuple with ``summaries``, ``alerts``, ``late``
    (streaming: (body, reason) of elements for an expired exposure) and ``bad`` (batch: the
    dead-letter lines of ``sources.bad_input``). Input:
    ``{"manifests": ..., "arrivals": ...}``, keyed and merged here, or one PCollection of
    :data:`KeyedElement` (``ReadExposureEvents``: a Flatten would re-encode every arrival)."""

    def __init__(self, config: SummaryConfig, streaming: bool) -> None:
        super().__init__()
        self.config = config
        self.streaming = streaming

    def expand(self, inputs: dict[str, beam.PCollection] | beam.PCollection) -> Any:
        if isinstance(inputs, beam.PCollection):
            keyed = inputs
        else:
            keyed_manifests = inputs["manifests"] | "KeyManifests" >> beam.Map(key_manifest)
            keyed_arrivals = inputs["arrivals"] | "KeyArrivals" >> beam.Map(key_arrival)
            keyed = (keyed_manifests, keyed_arrivals) | "Merge" >> beam.Flatten().with_output_types(
                KeyedElement
            )
        if self.streaming:
            fn: beam.DoFn = ExposureStateFn(self.config)
            grouped = keyed
        else:
            fn = SummarizeGroupFn(self.config)
            grouped = keyed | "FoldByExposure" >> beam.CombinePerKey(FoldExposure())
        return grouped | "Summarize" >> beam.ParDo(fn).with_outputs(ALERTS, LATE, BAD, main=SUMMARIES)
