"""What can go wrong at the edge that is not the destination's fault: permanent ones quarantine
the CCD with their ``reason``, retriable ones keep it journalled for a retry.
"""

from __future__ import annotations

from obsingest.errors import DiskFull, PermanentError, RetriableError


class SourceVanished(PermanentError, reason="source-vanished"):
    """The raw file was deleted (or moved away) before the edge could read it."""


class NeverCompleted(PermanentError, reason="never-completed"):
    """A file stayed in progress (``*.tmp`` / ``*.part``, or still growing) past the timeout."""


class BadHandoffFile(PermanentError, reason="bad-file-name"):
    """A file in the hand-off directory does not follow the naming convention."""


class BadManifest(PermanentError, reason="bad-manifest"):
    """An exposure manifest or header sidecar is not the JSON the convention asks for."""


class SourceUnreadable(RetriableError, reason="source-unreadable"):
    """The source exists but cannot be read now (permissions, I/O error, unmounted)."""


class SpoolFull(DiskFull, reason="spool-full"):
    """The spool filesystem has no room: the journal cannot record new work (a full disk, so
    a command that meets it exits 75 with one line, as for any exhausted resource)."""


class SpoolUnavailable(RetriableError, reason="spool-unavailable"):
    """The journal cannot be written for another reason (I/O error, read-only, locked)."""


class WorkerCrashed(RetriableError, reason="worker-crashed"):
    """The worker process died while handling a CCD (a signal such as SIGBUS or SIGKILL)."""


class UnexpectedError(RetriableError, reason="unexpected-error"):
    """A worker raised something that is not an ObsIngestError (a bug or a library surprise)."""
