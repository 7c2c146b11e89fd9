"""Registry backend on a real daf_butler repository (``pip install obsingest[butler]``).

A registry URL ``butler:<repo>`` (``butler:///data/repo``, ``butler:repo``, ``butler:s3://...``:
anything ``Butler.from_config`` opens, with a SQLite or PostgreSQL registry) makes
``open_registry`` (``registry.backends``) return a ``ButlerRegistry``. Registering a CCD then:

1. records it in obsingest's own tables (the *companion* registry: SQLite next to a local repo by
   default, ``OBSINGEST_BUTLER_COMPANION_URL`` otherwise). They keep what a Butler does not: the
   checksum that decides "redelivery" against "conflicting bytes", the stage timestamps, the
   quarantine. Same transaction rules as the plain registry: idempotent, conflicts refused.
2. inserts the dimension records the Butler needs (instrument and detectors as obs_lsst registers
   them, then per exposure: physical_filter, group, day_obs, exposure from the headers), and
   ingests the file with ``transfer="direct"`` (the Butler points at the object where it is),
   dataset id ``DATAID_TYPE_RUN`` (equal to obsingest's), into the configured run collection.
   A dataset already in the Butler with the same URI is skipped (redelivery, or a crash between
   the two steps healed); with another URI it is a ChecksumConflict, quarantined by the caller.

Only then does ``register`` return, so the ArrivalEvent announces a dataset the Butler has.
One Butler transaction costs ~0.1 s whatever its size (SQLite, this machine): one file per call
is ~10 files/s, 205 files per call ~2000/s. So registrations are *group-committed*
(``butler_batch``): callers that arrive while a batch is being ingested queue up, and a batch
waits (at most ``gather`` seconds) for the callers still reading and checking their file
(``arriving``). Concurrent delivery of an exposure (the relay's push concurrency, Cloud Functions
concurrency) therefore gives one Butler ingest per exposure; a lone caller is ingested at once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from obsingest.errors import ChecksumConflict, ObsIngestError, PermanentError
from obsingest.exhaustion import as_exhausted
from obsingest.logs import get_logger, log_event
from obsingest.registry import butler_records
from obsingest.registry.butler_batch import GatheringCommit, exposures_complete
from obsingest.registry.butler_records import with_timespan
from obsingest.registry.butler_repo import (
    ButlerSettings,
    default_companion_url,
    ensure_dataset_type,
    raw_formatter,
    repo_of,
)
from obsingest.registry.engine import make_engine
from obsingest.registry.migrations import migrate
from obsingest.registry.outbox import insert_rows
from obsingest.registry.registry import (
    OUTBOX_LEASE_SECONDS,
    Announcer,
    ExposureRecord,
    FileRecord,
    OutboxMessage,
    Registration,
    Registry,
    RegistryUnavailable,
)
from obsingest.settings import RegistrySettings

log = get_logger("obsingest.registry.butler")


class ButlerConflict(PermanentError):
    """The Butler already holds a different definition (an exposure record, a dataset type)."""

    reason = "butler-conflict"


@dataclass
class _Pending:
    record: FileRecord
    exposure: ExposureRecord
    announce: Announcer | None = None
    #: set (under the condition) once the whole batch, outbox rows included, is through
    done: bool = False
    result: Registration | None = None
    error: BaseException | None = None

    def finish(self, result: Registration | None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error


@dataclass
class _Stats:
    batches: int = 0
    files: int = 0
    largest: int = 0
    seconds: float = 0.0


class ButlerRegistry(Registry):
    """Registry whose datasets live in a daf_butler repository (see module doc)."""

    def __init__(
        self,
        engine: Any,
        settings: RegistrySettings,
        butler_settings: ButlerSettings,
        butler: Any,
        repo: str,
    ) -> None:
        super().__init__(engine, settings)
        self.butler = butler
        self.repo = repo
        self.butler_settings = butler_settings
        self.stats = _Stats()
        self._batches: GatheringCommit[_Pending] = GatheringCommit(
            self._flush,
            butler_settings.max_batch,
            gather=butler_settings.gather,
            gap=butler_settings.gather_gap,
            linger=butler_settings.linger,
            fresh=self._fresh,
            complete=lambda batch: exposures_complete(p.record.data_id for p in batch),
        )
        self._butler_lock = threading.Lock()
        self._static_done: set[str] = set()
        self._runs_done: set[str] = set()
        self._exposures_done: set[tuple[str, int]] = set()
        self._records: dict[tuple[str, int], dict[str, Any]] = {}
        self._detector_records: dict[tuple[str, int], Any] = {}
        self._instrument_records: dict[str, Any] = {}
        self._dtype: Any = None

    @classmethod
    def open(cls, settings: RegistrySettings, migrate_schema: bool = True) -> ButlerRegistry:
        from lsst.daf.butler import Butler

        butler_settings = ButlerSettings()
        repo = repo_of(settings.url)
        companion = butler_settings.companion_url or default_companion_url(repo)
        companion_settings = settings.model_copy(update={"url": companion})
        butler = Butler.from_config(repo, writeable=True)
        registry = cls(make_engine(companion_settings), settings, butler_settings, butler, repo)
        if migrate_schema:
            registry._retrying(lambda: migrate(registry.engine))
        return registry

    def close(self) -> None:
        super().close()
        self.butler.close()

    # registration: group commit ----------------------------------------------------------------
    def register(
        self,
        record: FileRecord,
        exposure: ExposureRecord | None = None,
        announce: Announcer | None = None,
    ) -> Registration:
        """Register one file in the companion and the Butler; returns once the Butler has it.

        ``announce``: the arrivals-outbox row is written (companion) only after the Butler has
        the dataset, so no drain can announce a dataset the Butler lacks; a crash in between
        leaves the notification unacked, and its redelivery announces the duplicate. The rows
        of a whole batch are written in one companion transaction by the batch's leader."""
        data_id = record.data_id
        exposure = exposure or ExposureRecord(data_id.instrument, data_id.exposure, data_id.day_obs)
        item = _Pending(record, exposure, announce)
        self._batches.submit(item)
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _fresh(self, batch: list[_Pending]) -> bool:
        """A batch holds the first CCD of an exposure this process has not seen: more come."""
        done = self._exposures_done
        return any((p.exposure.instrument, p.exposure.exposure) not in done for p in batch)

    def arriving(self) -> AbstractContextManager[None]:
        """The next batch waits (at most ``gather`` seconds) for this thread's ``register``."""
        return self._batches.arriving()

    def _flush(self, batch: list[_Pending]) -> None:
        """Companion then Butler for a whole batch; every item ends done (never raises)."""
        started = time.perf_counter()
        try:
            results = self.register_many([(p.record, p.exposure) for p in batch])
        except BaseException as exc:
            for p in batch:
                p.finish(None, exc)
            return
        ok: list[tuple[_Pending, Registration]] = []
        for p, result in zip(batch, results, strict=True):
            if isinstance(result, Registration):
                ok.append((p, result))
            else:
                p.finish(None, result)
        if ok:
            self._butler_step(ok)
            self._outbox_rows([p for p, _ in ok])
        seconds = time.perf_counter() - started
        self.stats.batches += 1
        self.stats.files += len(batch)
        self.stats.largest = max(self.stats.largest, len(batch))
        self.stats.seconds += seconds
        log_event(log, "butler.batch", files=len(batch), ingest_ms=round(seconds * 1000, 2))

    def _outbox_rows(self, items: Sequence[_Pending]) -> None:
        """The arrivals-outbox rows of the batch's new datasets the Butler now has, in one
        companion transaction (one per CCD cost ~2 ms each, serialised on SQLite's write lock).
        If it fails, those callers fail (retriable): their redelivery finds the dataset
        registered and announces it. A message that cannot be built fails only its caller."""
        new: list[tuple[_Pending, Registration, OutboxMessage]] = []
        for p in items:
            result = p.result
            if p.error is not None or result is None or not result.created or not p.announce:
                continue
            try:
                new.append((p, result, p.announce(result)))
            except Exception as exc:
                p.finish(None, exc)
        if not new:
            return

        def tx(conn: Any) -> list[int]:
            rows = [(r.dataset_id, message, r.registered_time) for _, r, message in new]
            return insert_rows(conn, rows, OUTBOX_LEASE_SECONDS)

        try:
            row_ids = self._retrying(lambda: self._in_tx(tx))
        except Exception as exc:
            for p, _, _ in new:
                p.finish(None, exc)
            return
        for (p, result, _), row_id in zip(new, row_ids, strict=True):
            p.finish(dataclasses.replace(result, outbox_id=row_id))

    # the Butler side ---------------------------------------------------------------------------
    def _butler_step(self, ok: Sequence[tuple[_Pending, Registration]]) -> None:
        """Ingest ``ok`` and finish each item. A permanent refusal of a batch spanning several
        exposures is retried per exposure, so one bad exposure record fails only its own CCDs."""
        try:
            refused = self._in_butler(ok)
        except PermanentError as exc:
            groups: dict[tuple[str, int], list[tuple[_Pending, Registration]]] = {}
            for item in ok:
                key = (item[0].exposure.instrument, item[0].exposure.exposure)
                groups.setdefault(key, []).append(item)
            if len(groups) > 1:
                for group in groups.values():
                    self._butler_step(group)
                return
            for p, _ in ok:
                p.finish(None, exc)
            return
        except ObsIngestError as exc:
            for p, _ in ok:
                p.finish(None, exc)
            return
        except Exception as exc:  # the Butler's database or datastore failed: retry later
            error = as_exhausted(exc, "registry", f"Butler repository {self.repo}") or (
                RegistryUnavailable(f"Butler repository {self.repo}: {type(exc).__name__}: {exc}")
            )
            for p, _ in ok:
                p.finish(None, error)
            return
        for p, registration in ok:
            if id(p) in refused:
                p.finish(None, refused[id(p)])
            else:
                p.finish(registration)

    def _in_butler(self, ok: Sequence[tuple[_Pending, Registration]]) -> dict[int, Exception]:
        """Dimension records, then one ingest for the files the Butler does not have yet.
        Returns the items refused (by ``id``): a dataset the Butler holds at another URI.

        When every file is new to the companion, the Butler cannot have it unless another tool
        put it there (or the companion lost it): the ingest then runs without asking first (the
        daf_butler query costs ~30% of a batch's CPU) and refuses such a dataset by failing;
        the batch is then rolled back and done again the careful way, which names it."""
        with self._butler_lock:
            if all(registration.created for _, registration in ok):
                try:
                    return self._in_transaction(ok, look=False)
                except ObsIngestError:
                    raise
                except Exception as exc:
                    log_event(log, "butler.ingest_retried_with_lookup", error=str(exc)[:200])
            return self._in_transaction(ok, look=True)

    def _in_transaction(
        self, ok: Sequence[tuple[_Pending, Registration]], look: bool
    ) -> dict[int, Exception]:
        with self.butler.transaction():
            try:
                return self._in_butler_locked(ok, look)
            except BaseException:
                # the transaction rolls back: forget which records this process wrote
                self._static_done.clear()
                self._exposures_done.clear()
                self._runs_done.clear()
                raise

    def _in_butler_locked(
        self, ok: Sequence[tuple[_Pending, Registration]], look: bool = True
    ) -> dict[int, Exception]:
        from lsst.daf.butler import DatasetIdGenEnum, DatasetRef, FileDataset

        butler = self.butler
        for p, _ in ok:
            self._static_records(p.record.data_id.instrument)
        for p, _ in ok:
            self._exposure_records(p.exposure)
        refused: dict[int, Exception] = {}
        by_run: dict[str, list[tuple[_Pending, Any]]] = {}
        for p, registration in ok:
            data_id = p.record.data_id
            coordinate = self._data_id(data_id.instrument, data_id.exposure, data_id.detector)
            ref = DatasetRef(
                self._dtype,
                coordinate,
                run=registration.run,
                id_generation_mode=DatasetIdGenEnum.DATAID_TYPE_RUN,
                # standardizing it again against the dataset type costs ~10% of a batch's CPU
                conform=coordinate.dimensions != self._dtype.dimensions,
            )
            if ref.id != registration.dataset_id:
                raise ButlerConflict(
                    f"{data_id.key}: the Butler's DATAID_TYPE_RUN id {ref.id} differs from "
                    f"obsingest's {registration.dataset_id} (dataset type or run template?)"
                )
            by_run.setdefault(registration.run, []).append((p, ref))
        datasets = []
        for run, items in by_run.items():
            existing = self._existing(run, [ref for _, ref in items]) if look else {}
            if not look:
                self._ensure_run(run)
            for p, ref in items:
                uri = existing.get(ref.id)
                if uri is None:
                    formatter = raw_formatter(
                        p.record.data_id.instrument, self.butler_settings.formatter
                    )
                    datasets.append(FileDataset(p.record.uri, [ref], formatter=formatter))
                elif uri != p.record.uri:
                    refused[id(p)] = ChecksumConflict(
                        f"{p.record.data_id.key}: the Butler at {self.repo} already has "
                        f"dataset {ref.id} at {uri}; refusing {p.record.uri}"
                    )
        if datasets:
            butler.ingest(
                *datasets,
                transfer="direct",
                record_validation_info=self.butler_settings.record_validation_info,
                skip_existing=look,
            )
        return refused

    def _ensure_run(self, run: str) -> None:
        """The run collection exists (registered if not), asked once per process."""
        if run in self._runs_done:
            return
        from lsst.daf.butler import CollectionType

        self.butler.registry.registerCollection(run, CollectionType.RUN)
        self._runs_done.add(run)

    def _existing(self, run: str, refs: list[Any]) -> dict[uuid.UUID, str]:
        """URI of each of ``refs`` the Butler already holds in ``run`` (one query per run)."""
        from lsst.daf.butler import CollectionType
        from lsst.daf.butler.registry import MissingCollectionError

        try:
            self.butler.registry.getCollectionType(run)
        except MissingCollectionError:
            self.butler.registry.registerCollection(run, CollectionType.RUN)
            return {}
        wanted = {ref.id for ref in refs}
        out: dict[uuid.UUID, str] = {}
        for instrument in sorted({ref.dataId["instrument"] for ref in refs}):
            exposures = sorted(
                {ref.dataId["exposure"] for ref in refs if ref.dataId["instrument"] == instrument}
            )
            found = self.butler.registry.queryDatasets(
                self._dtype,
                collections=run,
                where="instrument = inst AND exposure IN (exps)",
                bind={"inst": instrument, "exps": exposures},
            )
            out.update({r.id: str(self.butler.getURI(r)) for r in found if r.id in wanted})
        return out

    def _data_id(self, instrument: str, exposure: int, detector: int) -> Any:
        """An expanded data id (its dimension records attached), so the ingest does not query
        the records back: ~0.3 s less per 205-file batch."""
        from lsst.daf.butler import DataCoordinate

        universe = self.butler.dimensions
        plain = DataCoordinate.standardize(
            instrument=instrument, exposure=exposure, detector=detector, universe=universe
        )
        records = self._records.get((instrument, exposure))
        detector_record = self._detector_records.get((instrument, detector))
        if records is None or detector_record is None:
            return plain
        return plain.expanded({**records, "detector": detector_record})

    def _static_records(self, instrument: str) -> None:
        """Instrument and detector records (as obs_lsst registers them) and the dataset type,
        once per process."""
        if instrument in self._static_done:
            return
        registry = self.butler.registry
        record, detectors = butler_records.instrument_records(instrument)
        _sync(registry, "instrument", record)
        registry.insertDimensionData("detector", *detectors, skip_existing=True)
        detector_class = self.butler.dimensions["detector"].RecordClass
        for det in detectors:
            self._detector_records[(instrument, det["id"])] = detector_class(**det)
        self._instrument_records[instrument] = self.butler.dimensions["instrument"].RecordClass(
            **record
        )
        if self._dtype is None:
            self._dtype = ensure_dataset_type(
                self.butler, self.settings.dataset_type, self.butler_settings.storage_class
            )
        self._static_done.add(instrument)

    def _exposure_records(self, exposure: ExposureRecord) -> None:
        key = (exposure.instrument, exposure.exposure)
        if key in self._exposures_done:
            return
        registry = self.butler.registry
        records = butler_records.exposure_records(exposure)
        registry.insertDimensionData(
            "physical_filter", records["physical_filter"], skip_existing=True
        )
        registry.insertDimensionData("group", records["group"], skip_existing=True)
        day_obs, exposure_record = (with_timespan(records[k]) for k in ("day_obs", "exposure"))
        registry.insertDimensionData("day_obs", day_obs, skip_existing=True)
        _sync(registry, "exposure", exposure_record)
        if len(self._exposures_done) > 10_000:
            self._exposures_done.clear()
            self._records.clear()
        self._exposures_done.add(key)
        universe = self.butler.dimensions
        band = records["physical_filter"]["band"]
        self._records[key] = {
            "instrument": self._instrument_records[exposure.instrument],
            "exposure": universe["exposure"].RecordClass(**exposure_record),
            "physical_filter": universe["physical_filter"].RecordClass(
                **records["physical_filter"]
            ),
            "band": universe["band"].RecordClass(name=band),
            "group": universe["group"].RecordClass(**records["group"]),
            "day_obs": universe["day_obs"].RecordClass(**day_obs),
        }

    def batch_stats(self) -> dict[str, float]:
        """How registrations were grouped into Butler transactions so far."""
        s = self.stats
        return {
            "batches": s.batches,
            "files": s.files,
            "largest_batch": s.largest,
            "mean_batch": s.files / s.batches if s.batches else 0.0,
            "seconds": s.seconds,
        }


def _sync(registry: Any, element: str, record: dict[str, Any]) -> None:
    """Insert a dimension record, or check it equals the one there (ButlerConflict if not)."""
    from lsst.daf.butler.registry import ConflictingDefinitionError

    try:
        registry.syncDimensionData(element, record)
    except ConflictingDefinitionError as exc:
        raise ButlerConflict(
            f"the Butler holds another {element} record for "
            f"{ {k: record[k] for k in ('instrument', 'id', 'name') if k in record} }: {exc}"
        ) from None
