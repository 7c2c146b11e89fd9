"""What can go wrong at the edge that is not the destination's fault, and whether waiting helps.

Permanent ones quarantine the CCD with their ``reason``; retriable ones keep it journalled and
retry it later (the spool or the source may come back).
"""

from __future__ import annotations

from obsingest.errors import DiskFull, PermanentError, RetriableError


class SourceVanished(PermanentError):
    """The raw file was deleted (or moved away) before the edge could read it."""

    reason = "source-vanished"


class NeverCompleted(PermanentError):
    """A file stayed in progress (``*.tmp`` / ``*.part``, or still growing) past the timeout."""

    reason = "never-completed"


class BadHandoffFile(PermanentError):
    """A file in the hand-off directory does not follow the naming convention."""

    reason = "bad-file-name"


class BadManifest(PermanentError):
    """An exposure manifest or header sidecar is not the JSON the convention asks for."""

    reason = "bad-manifest"


class SourceUnreadable(RetriableError):
    """The source exists but cannot be read now (permissions, I/O error, unmounted)."""

    reason = "source-unreadable"


class SpoolFull(DiskFull):
    """The spool filesystem has no room: the journal cannot record new work (a full disk, so
    a command that meets it exits 75 with one line, as for any exhausted resource)."""

    reason = "spool-full"


class SpoolUnavailable(RetriableError):
    """The journal cannot be written for another reason (I/O error, read-only, locked)."""

    reason = "spool-unavailable"


class WorkerCrashed(RetriableError):
    """The worker process died while handling a CCD (a signal such as SIGBUS or SIGKILL)."""

    reason = "worker-crashed"


class UnexpectedError(RetriableError):
    """A worker raised something that is not an ObsIngestError (a bug or a library surprise)."""

    reason = "unexpected-error"
