"""One finalize event, I/O behind injected adapters, in the order at-least-once needs: validate,
register (idempotent, the ArrivalEvent in the outbox in the same transaction), publish, ack. A failed
publish leaves the row for a later drain; subscribers deduplicate on the dataset id. Permanent
problems are quarantined and acked, so one bad object never blocks the stream behind it.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from functions.register.announce import ArrivalAnnouncer, PeriodicDrain, arrival_message
from functions.register.exposures import ExposureCloser
from functions.register.verify import read_verified
from obsingest import defaults
from obsingest.bus.base import Publisher
from obsingest.checksums import checksum_from_crc32c_b64
from obsingest.dataid import DataId, identity_from_header, name_claim, parse_object_name
from obsingest.errors import (
    BadMetadata,
    ForeignBucket,
    HeaderMismatch,
    PermanentError,
    ResourceExhausted,
    RetriableError,
)
from obsingest.fits import Hdu
from obsingest.logs import get_logger, log_event, logging_context
from obsingest.messages import ArrivalEvent, utcnow
from obsingest.registry import (
    ExposureRecord,
    FileRecord,
    OutboxMessage,
    QuarantineEntry,
    Registration,
    Registry,
)
from obsingest.registry.headers import exposure_from_header
from obsingest.registry.ingested import IngestedCheck
from obsingest.store.base import ObjectStore, StoredObject
from obsingest.store.notifications import MetadataKeys, ObjectEvent
from obsingest.timescales import parse_utc

if TYPE_CHECKING:
    from obsingest.metrics import Metrics

log = get_logger("obsingest.register")

COMPONENT = "register"

#: ``obsingest-transport`` ("direct", "kafka"): a slug for a 16-character column
_TRANSPORT = re.compile(r"[a-z][a-z0-9-]{0,15}")


#: what became of one event (its ``obsingest_ccds_total`` label)
OutcomeStatus = Literal["registered", "duplicate", "quarantined", "ignored", "canary"]


@dataclass(frozen=True)
class Outcome:
    status: OutcomeStatus
    object_name: str
    data_id: DataId | None = None
    arrival: ArrivalEvent | None = None
    reason: str = ""
    message: str = ""


@dataclass
class RegisterService:
    store: ObjectStore
    registry: Registry
    publisher: Publisher
    arrivals_topic: str = defaults.ARRIVALS_TOPIC
    prefix: str = defaults.RAW_PREFIX
    quarantine_prefix: str = defaults.QUARANTINE_PREFIX
    #: None records nothing (unit tests)
    metrics: Metrics | None = None
    ingested_topic: str = defaults.EXPOSURES_INGESTED_TOPIC
    #: per-CCD budget, readout -> registered, that makes an exposure ``ok`` or ``over_budget``
    budget_seconds: float = defaults.BUDGET_SECONDS
    announcer: ArrivalAnnouncer = field(init=False, repr=False)
    closer: ExposureCloser = field(init=False, repr=False)
    _drain: PeriodicDrain = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.announcer = ArrivalAnnouncer(self.registry, self.publisher, self.metrics)
        self._drain = PeriodicDrain(self.announcer)  # every 5 s at most, per process
        check = IngestedCheck(self.registry, self.ingested_topic, self.budget_seconds, closed_by=COMPONENT)
        self.closer = ExposureCloser(check, self.announcer, self.metrics)

    def handle(self, event: ObjectEvent) -> Outcome:
        """Handle one event. Raises only RetriableError (or unexpected errors): retry those."""
        obj = event.obj
        if not event.is_finalize:
            outcome = Outcome("ignored", obj.name, reason=f"event type {event.event_type}")
            self._count(outcome)
            return outcome
        with logging_context(object=obj.name, event_id=event.event_id or None):
            try:
                outcome = self._handle(obj)
            except RetriableError as exc:
                if self.metrics is not None:
                    self.metrics.ccd(COMPONENT, "retried")
                    if isinstance(exc, ResourceExhausted):  # registry-full, rate-limited, ...
                        self.metrics.exhausted(COMPONENT, exc.reason)
                raise
        self._count(outcome)
        self._drain.maybe_drain()  # announce what an earlier outage left in the outbox
        return outcome

    def _count(self, outcome: Outcome) -> None:
        m = self.metrics
        if m is None or outcome.status == "canary":  # canaries are counted by reconcile
            return
        m.ccd(COMPONENT, outcome.status, reason=outcome.reason or None)
        arrival = outcome.arrival
        if outcome.status == "registered" and arrival is not None:
            for stage, at in (("stored", arrival.stored_time), ("registered", arrival.registered_time)):
                if at is not None:
                    latency = (at - arrival.readout_time).total_seconds()
                    m.readout_latency(stage, latency, arrival.transport, arrival.instrument)

    def _timed(self, operation: str) -> AbstractContextManager[None]:
        return nullcontext() if self.metrics is None else self.metrics.registry_operation(operation)

    def _handle(self, obj: StoredObject) -> Outcome:
        started = time.perf_counter()
        data_id: DataId | None = None
        try:
            if obj.bucket != self.store.bucket:
                raise ForeignBucket(
                    f"object {obj.name!r} is in bucket {obj.bucket!r}, "
                    f"not {self.store.bucket!r} that this function ingests from"
                )
            if obj.name.startswith(defaults.CANARY_PREFIX):  # reconcile's canary: notifications flow
                self.registry.audit.canary_seen(obj.name, utcnow())
                log_event(log, "canary.seen", logging.DEBUG, object_created=obj.time_created.isoformat())
                return Outcome("canary", obj.name, reason="canary")
            if obj.name.startswith(self.quarantine_prefix):
                return self._record_producer_quarantine(obj)
            claim = name_claim(obj.name, self.prefix)
            data_id = claim[0] if claim else None
            # a group-committing registry lets its next batch wait for this file's check
            with self.registry.arriving():
                outcome = self._register(obj, claim)
            with logging_context(data_id=outcome.data_id.key if outcome.data_id else None):
                log_event(
                    log,
                    "ccd." + outcome.status,
                    dataset_id=str(outcome.arrival.dataset_id) if outcome.arrival else None,
                    latency_s=round(outcome.arrival.latency, 6) if outcome.arrival else None,
                    handle_ms=round((time.perf_counter() - started) * 1000, 2),
                )
        except PermanentError as exc:  # a foreign bucket's object is named with its bucket
            foreign = f"{obj.bucket}/{obj.name}" if isinstance(exc, ForeignBucket) else None
            return self._quarantine(obj, data_id, exc.reason, str(exc), foreign)
        return outcome

    def _register(self, obj: StoredObject, claim: tuple[DataId, str | None] | None) -> Outcome:
        """Register one object under the data id its header gives (which ``claim`` must agree with)."""
        transport = obj.metadata.get(MetadataKeys.TRANSPORT, "direct")
        if not _TRANSPORT.fullmatch(transport):
            raise BadMetadata(
                f"object {obj.name!r}: metadata {MetadataKeys.TRANSPORT}={transport[:40]!r} "
                "is not a transport name (a lowercase slug of at most 16 characters)"
            )
        verified = read_verified(self.store, obj)
        data_id, exposure = self._check_header(obj.name, verified.primary, claim)
        with logging_context(data_id=data_id.key):
            record = FileRecord(
                data_id=data_id,
                uri=self.store.uri(obj.name),
                size=verified.size,
                checksum=verified.checksum,
                md5=obj.md5_hash,
                readout_time=_meta_time(obj, MetadataKeys.READOUT_TIME) or obj.time_created,
                compressed_time=_meta_time(obj, MetadataKeys.COMPRESSED_TIME),
                stored_time=obj.time_created,
                transport=transport,
            )
            built: list[tuple[ArrivalEvent, OutboxMessage]] = []

            def announce(registration: Registration) -> OutboxMessage:
                arrival = _arrival(registration, record)
                message = arrival_message(arrival, self.arrivals_topic)
                built.append((arrival, message))
                return message

            with self._timed("register"):
                registration = self.registry.register(record, exposure, announce=announce)
            published: list[int] = []
            if registration.created:
                arrival, message = built[-1]
                # marked published by the exposure's check below, in the same statement
                sent = self.announcer.publish_new(registration.outbox_id, message, arrival, mark=False)
                if sent is not None and registration.outbox_id is not None:
                    published.append(registration.outbox_id)
                pending = "" if sent else "announcement pending in the outbox"
                outcome = Outcome("registered", obj.name, data_id, sent or arrival, message=pending)
            else:
                again = self._announce_again(registration, record)
                outcome = Outcome("duplicate", obj.name, data_id, again)
            # after the commit (and the CCD's own announcement): did this CCD complete its exposure?
            # A redelivery asks too: its first delivery may have died between commit and check.
            self.closer.close_quietly(data_id.instrument, data_id.exposure, published)
            return outcome

    def _announce_again(self, registration: Registration, record: FileRecord) -> ArrivalEvent:
        """A redelivery publishes again (from the outbox row if still pending); only a dataset
        without an outbox row (older than the outbox) fails the delivery when publishing fails."""
        pending = self.registry.outbox.claim_dataset(registration.dataset_id)
        if pending is not None:
            sent = self.announcer.publish_row(pending)
            return sent if isinstance(sent, ArrivalEvent) else ArrivalEvent.decode(pending.message.payload)
        arrival = _arrival(registration, record)
        message = arrival_message(arrival, self.arrivals_topic)
        try:
            return self.announcer.send(message, arrival)
        except RetriableError:
            if self.registry.outbox.row(registration.dataset_id) is None:
                raise
            return arrival  # announced already: the outbox row is marked published

    def _check_header(
        self, name: str, primary: Hdu, claim: tuple[DataId, str | None] | None
    ) -> tuple[DataId, ExposureRecord]:
        """The CCD's data id and exposure record from its header; a name in either layout
        (``claim``) must say the same CCD, else HeaderMismatch."""
        identity = identity_from_header(primary.str_value, f"object {name!r}")
        if claim is not None:
            named, obs_id = claim
            if identity.data_id != named or obs_id not in (None, identity.obs_id):
                raise HeaderMismatch(
                    f"object {name!r}: header says {identity.data_id.key} "
                    f"({identity.obs_id} {identity.raft}_{identity.sensor}) but the name says "
                    f"{named.key}" + (f" ({obs_id})" if obs_id else "")
                )
        return identity.data_id, exposure_from_header(primary, identity.data_id, name)

    def _quarantine(
        self, obj: StoredObject, data_id: DataId | None, reason: str, message: str, uri: str | None = None
    ) -> Outcome:
        """Record a refused object with its reason; a repeat is counted, not duplicated."""
        with self._timed("quarantine"):
            self.registry.quarantine(
                QuarantineEntry(
                    object_uri=uri or self.store.uri(obj.name),
                    reason=reason,
                    message=message,
                    checksum=checksum_from_crc32c_b64(obj.crc32c) if obj.crc32c else "",
                    data_id=data_id,
                    size=obj.size,
                )
            )
        with logging_context(data_id=data_id.key if data_id else None):
            log_event(log, "ccd.quarantined", logging.WARNING, reason=reason, error=message)
        return Outcome("quarantined", obj.name, data_id, reason=reason, message=message)

    def quarantine_message(self, source: str, exc: PermanentError) -> Outcome:
        """A delivery that is not a notification at all: keep the reason, ack it."""
        with self._timed("quarantine"):
            self.registry.quarantine(QuarantineEntry(object_uri=source, reason=exc.reason, message=str(exc)))
        if self.metrics is not None:
            self.metrics.ccd(COMPONENT, "quarantined", reason=exc.reason)
        log_event(log, "event.quarantined", logging.WARNING, source=source, reason=exc.reason, error=str(exc))
        return Outcome("quarantined", source, reason=exc.reason, message=str(exc))

    def _record_producer_quarantine(self, obj: StoredObject) -> Outcome:
        """Producer-parked bytes (quarantine prefix): record why, register nothing."""
        reason = obj.metadata.get(MetadataKeys.QUARANTINE_REASON, "quarantined-by-producer")
        original = obj.metadata.get(MetadataKeys.QUARANTINE_ORIGINAL, "")
        try:
            data_id = parse_object_name(original, self.prefix) if original else None
        except PermanentError:
            data_id = None
        message = f"producer refused {original or obj.name!r}: {reason}; bytes kept at {obj.name!r}"
        return self._quarantine(obj, data_id, reason, message)


def _arrival(registration: Registration, record: FileRecord) -> ArrivalEvent:
    """The ArrivalEvent of a registration (``published_time`` is stamped when it is sent)."""
    data_id = record.data_id
    return ArrivalEvent(
        dataset_id=registration.dataset_id,
        dataset_type=registration.dataset_type,
        run=registration.run,
        instrument=data_id.instrument,
        exposure=data_id.exposure,
        detector=data_id.detector,
        day_obs=data_id.day_obs,
        uri=registration.uri,
        size=record.size,
        checksum=record.checksum,
        transport=record.transport,
        readout_time=record.readout_time or registration.registered_time,
        compressed_time=record.compressed_time,
        stored_time=record.stored_time,
        registered_time=registration.registered_time,
        published_time=registration.registered_time,
    )


def _meta_time(obj: StoredObject, key: str) -> datetime | None:
    """An ISO time in the object's metadata (naive: UTC); None if absent or unreadable (or
    with no UTC datetime: year 1 at +14:00)."""
    try:
        return parse_utc(obj.metadata.get(key, ""))
    except ValueError:
        return None
