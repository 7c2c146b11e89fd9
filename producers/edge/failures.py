"""What the edge does about a failed attempt at a CCD: quarantine it, count it as a crash, or
retry it; and whether the destination is to blame (then everything backs off). A resource that
ran out (``obsingest.exhaustion``) is an outage, never a verdict on the CCD.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsingest.errors import (
    BadObjectName,
    ChecksumConflict,
    CorruptFile,
    HeaderMismatch,
    ObsIngestError,
    ResourceExhausted,
)
from obsingest.exhaustion import Exhaustion, as_exhausted, exhaustion_of
from producers.edge.errors import (
    BadHandoffFile,
    BadManifest,
    NeverCompleted,
    SourceUnreadable,
    SourceVanished,
    SpoolFull,
    SpoolUnavailable,
    UnexpectedError,
    WorkerCrashed,
)

#: errors that are the input's fault: the CCD is quarantined with the reason
INPUT_FAULTS: tuple[type[ObsIngestError], ...] = (
    CorruptFile,
    HeaderMismatch,
    SourceVanished,
    NeverCompleted,
    BadHandoffFile,
    BadManifest,
    BadObjectName,
    ChecksumConflict,
)
#: the store refused this object's request (``obsingest.store.gcs.StoreRequestRefused``, a 400:
#: its name, its metadata; by its reason, not to import the GCS client for every destination); a
#: missing bucket or a denied permission, its subclasses with reasons of their own, is an outage
OBJECT_REFUSED = "store-request-refused"
#: retriable faults of the edge's own side (source, spool): that CCD alone backs off
EDGE_SIDE = (SourceUnreadable, SpoolFull, SpoolUnavailable)


@dataclass(frozen=True)
class Verdict:
    """``action``: ``quarantine`` (the input's fault), ``crash`` (a worker died or raised
    something unknown: quarantined after the crash limit) or ``retry`` (after a backoff: the
    destination's if ``destination_fault``, else this CCD's own)."""

    action: str
    error: ObsIngestError
    destination_fault: bool = False

    @property
    def exhausted(self) -> ResourceExhausted | None:
        """What ran out beyond the edge's own side (the spool says so by refusing new work)."""
        error = self.error
        if isinstance(error, ResourceExhausted) and not isinstance(error, EDGE_SIDE):
            return error
        return None


def judge(error: BaseException, destination: str = "") -> Verdict:
    """The verdict on one failed attempt (unwrapped from ``SendFailed``); ``destination``
    names where an exhausted resource is when the error does not say."""
    if isinstance(error, INPUT_FAULTS) or (
        isinstance(error, ObsIngestError) and error.reason == OBJECT_REFUSED
    ):
        return Verdict("quarantine", error)
    if isinstance(error, EDGE_SIDE):
        return Verdict("retry", error)
    exhausted = _exhausted(error, destination)
    if exhausted is not None:
        memory = exhaustion_of(exhausted) is Exhaustion.MEMORY
        return Verdict("retry", exhausted, destination_fault=not memory)
    if isinstance(error, WorkerCrashed | UnexpectedError):
        return Verdict("crash", error)
    if not isinstance(error, ObsIngestError):
        return Verdict("crash", UnexpectedError(f"{type(error).__name__}: {error}"))
    return Verdict("retry", error, destination_fault=True)


def _exhausted(error: BaseException, destination: str) -> ResourceExhausted | None:
    """``error`` as a ResourceExhausted if it says something ran out. A worker crash is none
    (the OOM killer's SIGKILL cannot be told from any other); an error the worker could not
    send back (``UnexpectedError`` naming it) is read by its words."""
    if isinstance(error, WorkerCrashed):
        return None
    kind = exhaustion_of(error)
    if kind is None:
        return None
    if kind is Exhaustion.MEMORY:
        return as_exhausted(error, "memory", "edge worker")
    where = getattr(error, "filename", None) or destination
    return as_exhausted(error, "destination", str(where))
