"""What one edge worker does to one CCD: read -> compress -> spool if it must wait -> send, with
the journal commits of producers/edge/README.md ("The journal and recovery").

The raw file is read with plain ``read`` calls into a kept buffer, never memory-mapped: a file
truncated under a map kills the reader with SIGBUS, a short read is an ordinary ``CorruptFile``.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from obsingest.checksums import checksum_str
from obsingest.dataid import DataId
from obsingest.errors import CorruptFile, ObsIngestError
from obsingest.fileio import write_atomic
from obsingest.logs import get_logger, log_event
from obsingest.messages import utcnow
from producers.edge.errors import SourceUnreadable, SourceVanished, SpoolFull, SpoolUnavailable
from producers.edge.journal import Entry, Journal, State
from producers.edge.sidecar import check_sidecar, merge_sidecar
from producers.sender import SendStatus

log = get_logger("obsingest.edge")

SPOOL_CCD_DIR = "ccd"


@dataclass(frozen=True)
class CcdFile:
    """A CCD handed to the edge: where its raw FITS file is and which CCD it is."""

    path: str
    instrument: str
    exposure: int
    detector: int
    #: when the camera read it out (UTC); None: from the exposure manifest or the file's mtime
    readout_time: datetime | None = None
    #: optional Rubin-style JSON header sidecar, merged into the primary header
    sidecar: str | None = None

    @property
    def data_id(self) -> DataId:
        return DataId(self.instrument, self.exposure, self.detector)

    @classmethod
    def from_header(
        cls, path: str | Path, readout_time: datetime | None = None, sidecar: str | None = None
    ) -> CcdFile:
        """The CCD at ``path``, which CCD it is read from its header and ``sidecar`` as the
        hand-off directory reads it, for a DAQ that does not know the data id; ``readout_time``
        by default from DATE-END. NoIdentity, HeaderMismatch, CorruptFile or SourceVanished."""
        from producers.edge.identity import handoff_identity_and_readout
        from producers.edge.sidecar import load_sidecar

        cards = load_sidecar(Path(sidecar)) if sidecar else None
        identity, readout_end = handoff_identity_and_readout(Path(path), cards)
        if readout_time is None and readout_end is not None:
            readout_time = datetime.fromtimestamp(readout_end, UTC)
        d = identity.data_id
        return cls(str(path), d.instrument, d.exposure, d.detector, readout_time, sidecar)


#: where one CCD (or one attempt at it) ended
OutcomeState = Literal["acked", "quarantined", "retry"]
#: how it was sent; "" when it was not
OutcomeStatus = SendStatus | Literal[""]


@dataclass(frozen=True)
class Outcome:
    """What became of one CCD (or one attempt at it)."""

    key: str
    state: OutcomeState
    status: OutcomeStatus = ""
    object_name: str = ""
    raw_size: int = 0
    size: int = 0
    checksum: str = ""
    read_seconds: float = 0.0
    compress_seconds: float = 0.0
    send_seconds: float = 0.0
    readout_time: datetime | None = None
    compressed_time: datetime | None = None
    acked_time: datetime | None = None
    spooled: str | None = None
    attempts: int = 0
    reason: str = ""
    error: str = ""
    #: the journal could not be written during this attempt (spool full): the CCD still went
    journal_error: str = ""
    #: wall clock when the worker took this attempt (its queueing ends here)
    started_time: datetime | None = None
    #: CPU seconds of the worker process for this attempt: read (+ compress), and send
    read_compress_cpu_seconds: float = 0.0
    send_cpu_seconds: float = 0.0
    worker_pid: int = 0
    #: the hand-off was already tile-compressed (``.fits.fz``): sent as it is
    precompressed: bool = False

    @property
    def cpu_seconds(self) -> float:
        return self.read_compress_cpu_seconds + self.send_cpu_seconds

    @property
    def ok(self) -> bool:
        return self.state == "acked"

    @property
    def latency(self) -> float | None:
        """Readout -> acknowledged, seconds."""
        if self.readout_time is None or self.acked_time is None:
            return None
        return (self.acked_time - self.readout_time).total_seconds()


class SendFailed(ObsIngestError):
    """Carries a transient send failure back to the service with the spooled copy's path."""

    def __init__(self, error: ObsIngestError, outcome: Outcome) -> None:
        super().__init__(str(error))
        self.error = error
        self.outcome = outcome
        self.retriable = error.retriable
        self.reason = error.reason


def read_exact(path: str, buf: bytearray | None = None) -> bytearray:
    """The whole file into ``buf`` (reused when it has the file's size). SourceVanished (gone),
    SourceUnreadable (permissions, I/O) or CorruptFile (shrank while it was read)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise SourceVanished(f"{path}: vanished before it was read") from None
    except OSError as exc:
        raise SourceUnreadable(f"{path}: cannot open: {exc.strerror or exc}") from None
    try:
        size = os.fstat(fd).st_size
        if buf is None or len(buf) != size:
            buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        try:
            while got < size:
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    raise CorruptFile(f"{path}: truncated while being read: got {got} of {size} bytes")
                got += n
        except OSError as exc:
            if exc.errno == errno.EIO:
                raise SourceUnreadable(f"{path}: I/O error while reading: {exc}") from None
            raise SourceUnreadable(f"{path}: read failed: {exc}") from None
        finally:
            view.release()
        return buf
    finally:
        os.close(fd)


def warm_up() -> None:
    """Import and exercise the codec once, as a long-running edge process has, so the first
    CCD's latency is not an interpreter start-up figure."""
    import numpy as np

    from obsingest.fits import header_bytes, make_card, padded
    from producers.compress import compress_fits, decompress_fits

    cards = [
        make_card(k, v)
        for k, v in (("SIMPLE", True), ("BITPIX", 32), ("NAXIS", 2), ("NAXIS1", 8), ("NAXIS2", 8))
    ]
    pixels = np.arange(64, dtype=">i4").tobytes()
    decompress_fits(compress_fits(header_bytes(cards) + pixels.ljust(padded(len(pixels)), b"\0"), threads=1))


#: a hand-off with this suffix is already tile-compressed (fpack's convention): sent as it is
PRECOMPRESSED_SUFFIX = ".fz"


def verify_precompressed(data: bytes | bytearray, source: str) -> None:
    """A pre-compressed hand-off must be a structurally valid FITS file whose images are all
    tile-compressed (``ZIMAGE = T``); CorruptFile naming the file and the reason otherwise."""
    from obsingest.fits import parse_fits

    try:
        hdus = parse_fits(data)
    except CorruptFile as exc:
        raise CorruptFile(f"{source}: pre-compressed hand-off is not valid FITS: {exc}") from None
    images = [h for h in hdus[1:] if h.value("ZIMAGE") is not None]
    plain = [h.index for h in hdus[1:] if h.value("ZIMAGE") is None and h.str_value("XTENSION") == "IMAGE"]
    if not images or plain or any(h.value("ZIMAGE") != "T" for h in images):
        raise CorruptFile(
            f"{source}: a .fits.fz hand-off must hold tile-compressed images (ZIMAGE = T); "
            + (f"HDUs {plain} are uncompressed images" if plain else "it has none")
        )


def spool_path(spool: Path, key: str) -> Path:
    return spool / SPOOL_CCD_DIR / (key.replace("/", "_") + ".fits.fz")


def open_edge_sender(destination: str, prefix: str, quarantine_prefix: str, producer: str) -> Any:
    """The worker's sender: ``gs://BUCKET`` through ``GcsStore`` (one JSON-API request per put,
    cheaper than the library's upload); else what ``producers.sender.open_sender`` opens."""
    if destination.startswith("gs://"):
        from obsingest.store.gcs import GcsStore
        from producers.uploader import DirectUploader

        bucket = destination[len("gs://") :].split("/", 1)[0]
        return DirectUploader(GcsStore(bucket), prefix, quarantine_prefix, producer=producer)
    from producers.sender import open_sender

    return open_sender(destination, prefix, quarantine_prefix, producer=producer)


class CcdWorker:
    """A worker process's handler: warm codec, one sender, one journal connection, one buffer."""

    def __init__(
        self,
        destination: str,
        prefix: str,
        quarantine_prefix: str,
        spool: str,
        threads: int = 1,
        warm: bool = True,
        durable_ack: bool = False,
    ) -> None:
        if warm:
            warm_up()
        self.spool = Path(spool)
        self.threads = threads
        self.sender = open_edge_sender(destination, prefix, quarantine_prefix, producer=f"edge-{os.getpid()}")
        self.journal = Journal(self.spool)
        #: fsync the ack: only needed when the raw file is released after it (on_ack)
        self.durable_ack = durable_ack
        self.buffer: bytearray | None = None

    def close(self) -> None:
        for owner in (self.sender, getattr(self.sender, "store", None)):
            close = getattr(owner, "close", None)
            if callable(close):
                close()
        self.journal.close()

    def _mark(
        self, key: str, state: State, notes: list[str], durable: bool = False, **values: object
    ) -> None:
        try:
            self.journal.mark(key, state, durable=durable, **values)
        except (SpoolFull, SpoolUnavailable) as exc:
            notes.append(str(exc))
            log_event(log, "edge.journal_failed", logging.ERROR, key=key, state=state, error=str(exc))

    def _spooled(self, job: Entry) -> bytes | None:
        if not job.spooled or not job.checksum:
            return None
        try:
            data = Path(job.spooled).read_bytes()
        except OSError:
            return None
        if checksum_str(data) != job.checksum:
            log_event(
                log,
                "edge.spool_discarded",
                logging.WARNING,
                key=job.key,
                path=job.spooled,
                reason="checksum-mismatch",
            )
            return None
        return data

    def _spill(self, key: str, data: bytes, notes: list[str]) -> str | None:
        path = spool_path(self.spool, key)
        try:
            write_atomic(path, data)
        except OSError as exc:
            notes.append(f"spool {path}: {exc.strerror or exc}")
            log_event(log, "edge.spill_failed", logging.ERROR, key=key, error=str(exc))
            return None
        return str(path)

    def __call__(self, job: Entry) -> Outcome:
        """One attempt at the CCD the journal row ``job`` is."""
        instrument, exposure, detector = job.key.split("/")
        data_id = DataId(instrument, int(exposure), int(detector))
        readout = datetime.fromtimestamp(job.readout or time.time(), UTC)
        notes: list[str] = []
        started = time.time()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        data = self._spooled(job)
        raw_size = 0
        read_s = compress_s = 0.0
        precompressed = False
        attempts = job.attempts + 1
        sending: dict[str, Any] = {"attempts": attempts}
        if data is not None:
            compressed_at = job.compressed_at or time.time()
            spooled = job.spooled
            checksum = job.checksum or checksum_str(data)  # the spooled copy matched it
        else:
            data, read_s, precompressed = self._compress(job, data_id)
            raw_size = len(self.buffer or b"")
            compress_s = time.perf_counter() - t0 - read_s
            compressed_at = time.time()
            spooled = None
            checksum = checksum_str(data)  # once: 15 MB of CRC32C per pass
            sending.update(size=len(data), checksum=checksum, compressed_at=compressed_at, spooled=None)
        cpu1 = time.process_time()
        self._mark(job.key, "sent", notes, **sending)
        compressed_time = datetime.fromtimestamp(compressed_at, UTC)

        def finished(state: OutcomeState, **fields: Any) -> Outcome:
            return Outcome(
                key=job.key,
                state=state,
                raw_size=raw_size,
                size=len(data),
                checksum=checksum,
                readout_time=readout,
                compressed_time=compressed_time,
                attempts=attempts,
                journal_error="; ".join(notes),
                started_time=datetime.fromtimestamp(started, UTC),
                read_compress_cpu_seconds=cpu1 - cpu0,
                send_cpu_seconds=time.process_time() - cpu1,
                worker_pid=os.getpid(),
                precompressed=precompressed,
                **fields,
            )

        t2 = time.perf_counter()
        try:
            result = self.sender.send(data_id, data, readout, compressed_time)
        except ObsIngestError as exc:
            if not exc.retriable:
                raise
            if spooled is None:
                spooled = self._spill(job.key, data, notes)
                if spooled:
                    self._mark(job.key, "compressed", notes, spooled=spooled)
            outcome = finished("retry", spooled=spooled, reason=exc.reason, error=str(exc))
            raise SendFailed(exc, outcome) from exc
        acked = utcnow()
        send_s = time.perf_counter() - t2
        self._mark(
            job.key,
            "acked",
            notes,
            durable=self.durable_ack,
            status=result.status,
            object=result.object_name,
            acked_at=acked.timestamp(),
            checksum=checksum,
        )
        if spooled:
            Path(spooled).unlink(missing_ok=True)
        return finished(
            "acked",
            status=result.status,
            object_name=result.object_name,
            read_seconds=read_s,
            compress_seconds=compress_s,
            send_seconds=send_s,
            acked_time=acked,
        )

    def _compress(self, job: Entry, data_id: DataId) -> tuple[bytes, float, bool]:
        """(compressed bytes, seconds reading them, whether they came compressed). A ``.fits.fz``
        is verified and sent as it is: a sidecar's identity is checked, its cards not merged
        (that would void the file's CHECKSUM and mean decompressing it)."""
        from producers.compress import compress_fits

        t0 = time.perf_counter()
        self.buffer = raw = read_exact(job.source, self.buffer)
        if job.source.endswith(PRECOMPRESSED_SUFFIX):
            if job.sidecar:
                check_sidecar(Path(job.sidecar), data_id, raw)
            verify_precompressed(raw, job.source)
            return bytes(raw), time.perf_counter() - t0, True
        if job.sidecar:
            raw = merge_sidecar(raw, Path(job.sidecar), data_id)
        read_s = time.perf_counter() - t0
        try:
            return compress_fits(raw, threads=self.threads), read_s, False
        except CorruptFile as exc:
            raise CorruptFile(f"{job.source}: {exc}") from None
