"""Redrive: dead-lettered notifications go back to the objects topic after ``first_delay * 2**n``
(at most ``max_delay``), at most ``max_redrives`` times, then parked with their history. State
lives only in the message attributes; dying between publish and ack redrives twice (idempotent).
"""

from __future__ import annotations

import enum
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from functions.register.facility.settings import RedriveSettings
from obsingest.bus.base import Publisher
from obsingest.bus.pull import Delivery, PullSource
from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow

log = get_logger("obsingest.redrive")

REDRIVE_COUNT = "redrive_count"
HISTORY_PREFIX = "redrive_history_"
PARKED_REASON = "parked_reason"
PARKED_AT = "parked_at"
#: attributes of one dead-lettering (the relay's, Pub/Sub's), moved into the history
_DEAD_LETTER_PREFIXES = ("dlq_", "CloudPubSubDeadLetterSource", PARKED_REASON, PARKED_AT)
#: Pub/Sub's limit on one attribute value
_ATTRIBUTE_BYTES = 1024


class Decision(enum.Enum):
    REDRIVE = "redrive"
    WAIT = "wait"
    PARK = "park"


def redrives_so_far(attributes: dict[str, str]) -> int:
    try:
        return max(int(attributes.get(REDRIVE_COUNT, "0")), 0)
    except ValueError:
        return 0


def reason_of(attributes: dict[str, str]) -> str:
    """Why the message was dead-lettered, as the one who did it said."""
    if attributes.get("dlq_reason"):
        return attributes["dlq_reason"]
    count = attributes.get("CloudPubSubDeadLetterSourceDeliveryCount")
    if count:
        return f"dead-lettered by Pub/Sub after {count} delivery attempts"
    return "unknown (no reason attribute)"


def matches(attributes: dict[str, str], wanted: str | None) -> bool:
    """A manual redrive's filter: ``wanted`` in the reason (any case) or the HTTP status (``503``,
    ``none``)."""
    if not wanted:
        return True
    needle = wanted.lower()
    return needle in reason_of(attributes).lower() or needle == attributes.get("dlq_status", "")


def decide(
    attributes: dict[str, str],
    dead_lettered_at: datetime,
    now: datetime,
    policy: RedriveSettings,
    force: bool = False,
) -> Decision:
    """What to do with one letter now; ``force`` (a human asked) redrives whatever its count."""
    if force:
        return Decision.REDRIVE
    count = redrives_so_far(attributes)
    if count >= policy.max_redrives:
        return Decision.PARK
    due = dead_lettered_at + timedelta(seconds=policy.delay(count))
    return Decision.REDRIVE if now >= due else Decision.WAIT


def _history_entry(attributes: dict[str, str], dead_lettered_at: datetime) -> str:
    entry = {
        "at": dead_lettered_at.astimezone(UTC).isoformat(),
        "attempts": attributes.get("dlq_attempts")
        or attributes.get("CloudPubSubDeadLetterSourceDeliveryCount"),
        "status": attributes.get("dlq_status"),
        "reason": reason_of(attributes),
    }
    text = json.dumps(entry, separators=(",", ":"))
    while len(text.encode()) > _ATTRIBUTE_BYTES:  # keep within Pub/Sub's attribute limit
        entry["reason"] = str(entry["reason"])[: max(len(str(entry["reason"])) - 64, 0)]
        text = json.dumps(entry, separators=(",", ":"))
    return text


def history(attributes: dict[str, str]) -> list[dict[str, Any]]:
    """Every earlier dead-lettering of this notification, oldest first."""
    entries = []
    for key, value in attributes.items():
        if key.startswith(HISTORY_PREFIX):
            try:
                entries.append((int(key[len(HISTORY_PREFIX) :]), json.loads(value)))
            except ValueError:
                continue
    return [entry for _, entry in sorted(entries, key=lambda e: e[0])]


def _recorded(attributes: dict[str, str], dead_lettered_at: datetime) -> dict[str, str]:
    """The attributes with this dead-lettering's own fields moved into the history."""
    number = len(history(attributes)) + 1
    kept = {k: v for k, v in attributes.items() if not k.startswith(_DEAD_LETTER_PREFIXES)}
    kept[f"{HISTORY_PREFIX}{number}"] = _history_entry(attributes, dead_lettered_at)
    return kept


def redriven_attributes(attributes: dict[str, str], dead_lettered_at: datetime) -> dict[str, str]:
    out = _recorded(attributes, dead_lettered_at)
    out[REDRIVE_COUNT] = str(redrives_so_far(attributes) + 1)
    return out


def parked_attributes(
    attributes: dict[str, str], dead_lettered_at: datetime, now: datetime
) -> dict[str, str]:
    out = _recorded(attributes, dead_lettered_at)
    out[PARKED_AT] = now.astimezone(UTC).isoformat()
    out[PARKED_REASON] = (
        f"dead-lettered {len(history(out))} times, redriven {redrives_so_far(attributes)} "
        f"times; last reason: {reason_of(attributes)}"
    )[:_ATTRIBUTE_BYTES]
    return out


@dataclass
class RedriveReport:
    scanned: int = 0
    redriven: int = 0
    parked: int = 0
    waiting: int = 0
    skipped: int = 0  # not selected by the filter
    failed: int = 0  # could not be republished: left for the next pass
    dry_run: bool = False
    next_due: datetime | None = None
    by_reason: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        next_due = self.next_due.isoformat() if self.next_due else None
        return asdict(self) | {"next_due": next_due, "by_reason": dict(self.by_reason.most_common())}


@dataclass
class Redriver:
    """One dead-letter hold subscription -> the objects topic (or the parked topic)."""

    #: the dead-letter topic's hold subscription
    source: PullSource
    publisher: Publisher
    objects_topic: str
    parked_topic: str
    policy: RedriveSettings = field(default_factory=RedriveSettings)
    clock: Callable[[], datetime] = utcnow

    def run_pass(
        self, *, reason: str | None = None, dry_run: bool = False, force: bool = False
    ) -> RedriveReport:
        """Look at every letter once: redrive the due (or, ``force``, all selected), park the
        exhausted, leave the rest; ``dry_run`` counts and changes nothing."""
        report = RedriveReport(dry_run=dry_run)
        seen: set[str] = set()
        held: list[str] = []
        try:
            while report.scanned < self.policy.max_per_pass:
                batch = self.source.pull(min(100, self.policy.max_per_pass), 1.0)  # seconds
                fresh = [d for d in batch if d.message_id not in seen]
                held += [d.ack_id for d in batch if d.message_id in seen]
                if not fresh:
                    break
                for delivery in fresh:
                    seen.add(delivery.message_id)
                    if not self._one(delivery, report, reason, dry_run, force):
                        held.append(delivery.ack_id)
        finally:
            self._release(held)
        if report.scanned:
            log_event(log, "redrive.pass", logging.INFO, **report.as_dict())
        return report

    def _one(
        self, delivery: Delivery, report: RedriveReport, reason: str | None, dry_run: bool, force: bool
    ) -> bool:
        """Handle one letter; True when it left the subscription (redriven or parked)."""
        report.scanned += 1
        attributes = dict(delivery.attributes)
        if not matches(attributes, reason):
            report.skipped += 1
            return False
        report.by_reason[_short(reason_of(attributes))] += 1
        now = self.clock()
        lettered = delivery.publish_time or now
        decision = decide(attributes, lettered, now, self.policy, force=force)
        if decision is Decision.WAIT:
            report.waiting += 1
            due = lettered + timedelta(seconds=self.policy.delay(redrives_so_far(attributes)))
            report.next_due = min(report.next_due or due, due)
            return False
        redrive = decision is Decision.REDRIVE
        if not dry_run:
            if redrive:
                topic, attrs = self.objects_topic, redriven_attributes(attributes, lettered)
            else:
                topic, attrs = self.parked_topic, parked_attributes(attributes, lettered, now)
            try:
                self.publisher.publish(topic, delivery.data, attributes=attrs)
            except Exception as exc:  # the topic is down: the letter stays for the next pass
                report.failed += 1
                log_event(
                    log,
                    "redrive.publish_failed",
                    logging.WARNING,
                    message_id=delivery.message_id,
                    topic=topic,
                    error=str(exc),
                )
                return False
            try:
                self.source.ack([delivery.ack_id])
            except Exception as exc:  # comes back after its deadline: redriven twice, idempotent
                log_event(log, "redrive.ack_failed", logging.WARNING, error=str(exc))
            log_event(
                log,
                "redrive.redriven" if redrive else "redrive.parked",
                logging.WARNING if redrive else logging.ERROR,
                message_id=delivery.message_id,
                object=attributes.get("objectId"),
                redrives=redrives_so_far(attrs) if redrive else None,
                reason=reason_of(attributes),
            )
        if redrive:
            report.redriven += 1
        else:
            report.parked += 1
        return not dry_run

    def _release(self, ack_ids: list[str]) -> None:
        if not ack_ids:
            return
        try:
            self.source.nack(ack_ids, 0)
        except Exception as exc:  # they come back after the ack deadline anyway
            log_event(log, "redrive.release_failed", logging.WARNING, error=str(exc))


def _short(reason: str) -> str:
    """A reason without its details, to count letters by cause (``HTTP 503``, ``no response``)."""
    head = reason.split(":", 1)[0].strip()
    return head[:60] or "unknown"
