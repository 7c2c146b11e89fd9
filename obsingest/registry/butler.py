"""Registry backend on a real daf_butler repository (``butler:<repo>``, ``obsingest[butler]``).

The Butler is the registry of record: a CCD is registered once the Butler holds it. Registering:

1. checks obsingest's *companion* tables (SQLite next to a local repo, or
   ``OBSINGEST_BUTLER_COMPANION_URL``: checksums, stage times, quarantine, outbox) for the data
   id recorded with other bytes (``ChecksumConflict``);
2. sets up what the Butler lacks (``butler_setup``), then ingests the files in one Butler
   transaction (``transfer="direct"``, dataset id ``DATAID_TYPE_RUN``, equal to obsingest's);
   a dataset the Butler holds at another URI is a ChecksumConflict;
3. only then records the datasets and their outbox rows in one companion transaction.

So the companion never claims what the Butler lacks; a failure between 2 and 3 fails retriably
and the redelivery, or reconcile, records and announces it once. A Butler transaction costs about
the same whatever its size, so concurrent registrations are group-committed (``group_commit``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, cached_property
from typing import Any

from sqlalchemy import Connection

from obsingest.errors import ChecksumConflict, ObsIngestError
from obsingest.exhaustion import as_exhausted
from obsingest.logs import get_logger, log_event
from obsingest.registry import db_errors
from obsingest.registry.butler_reads import ButlerAudit, ButlerReads
from obsingest.registry.butler_repo import ButlerSettings, default_companion_url, raw_formatter, repo_of
from obsingest.registry.butler_setup import ButlerConflict, ButlerSetup
from obsingest.registry.db_errors import RegistryUnavailable
from obsingest.registry.engine import make_engine, open_butler
from obsingest.registry.group_commit import GroupCommit, exposures_complete
from obsingest.registry.migrations import migrate
from obsingest.registry.outbox import insert_rows
from obsingest.registry.registry import (
    OUTBOX_LEASE_SECONDS,
    Announcer,
    ExposureRecord,
    FileRecord,
    Registration,
    Registry,
    checksum_conflict,
)
from obsingest.retry import RetriesExhausted
from obsingest.settings import RegistrySettings, run_name

log = get_logger("obsingest.registry.butler")

__all__ = ["ButlerConflict", "ButlerRegistry"]


@dataclass
class _Pending:
    record: FileRecord
    exposure: ExposureRecord
    announce: Announcer | None = None
    done: bool = False
    result: Registration | None = None
    error: BaseException | None = None


class ButlerRegistry(ButlerReads, Registry):
    """Registry whose datasets live in a daf_butler repository (see module doc)."""

    def __init__(
        self, engine: Any, settings: RegistrySettings, butler_settings: ButlerSettings, butler: Any, repo: str
    ) -> None:
        super().__init__(engine, settings)
        self.butler = butler
        self.repo = repo
        self.butler_settings = butler_settings
        #: how registrations were grouped into Butler transactions (``batch_stats``)
        self._stats: dict[str, float] = {"batches": 0, "files": 0, "largest_batch": 0, "seconds": 0.0}
        self._batches: GroupCommit[_Pending] = GroupCommit(
            self._flush,
            butler_settings.max_batch,
            gather=butler_settings.gather,
            gap=butler_settings.gather_gap,
            linger=butler_settings.linger,
            fresh=self._fresh,
            complete=lambda batch: exposures_complete(p.record.data_id for p in batch),
            prepare=self._prepare,
        )
        self._butler_lock = threading.RLock()
        self.setup = ButlerSetup(butler, settings.dataset_type, butler_settings.storage_class)
        self._seen_exposures: set[tuple[str, int]] = set()

    @classmethod
    def open(cls, settings: RegistrySettings, migrate_schema: bool = True) -> ButlerRegistry:
        butler_settings = ButlerSettings()
        repo = repo_of(settings.url)
        companion = butler_settings.companion_url or default_companion_url(repo)
        companion_settings = settings.model_copy(update={"url": companion})
        try:
            butler = open_butler(repo, writeable=True)
        except Exception as exc:  # its database down at start: an outage (503), not a bug (500)
            if db_errors.classify(exc) is not db_errors.Verdict.TRANSIENT:
                raise
            raise _unavailable(exc, repo) from exc
        registry = cls(make_engine(companion_settings), settings, butler_settings, butler, repo)
        if migrate_schema:
            registry._retrying(lambda: migrate(registry.engine))
        return registry

    def close(self) -> None:
        super().close()
        self.butler.close()

    @cached_property
    def audit(self) -> ButlerAudit:
        """Reconcile's queries: registered means the Butler and the companion hold it."""
        return ButlerAudit(self.engine, self._retrying, self)

    def register(
        self, record: FileRecord, exposure: ExposureRecord | None = None, announce: Announcer | None = None
    ) -> Registration:
        """Register one file; returns once the Butler and then the companion have it."""
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
        seen = self._seen_exposures
        return any((p.exposure.instrument, p.exposure.exposure) not in seen for p in batch)

    def _prepare(self, queued: list[_Pending]) -> None:
        """While a batch gathers, do its flush's set-up; a failure is left to the flush."""
        if self.butler_settings.gather <= 0:
            return  # no gathering to overlap: the flush sets up
        runs = [run_name(self.settings.run, p.record.data_id.instrument) for p in queued]
        try:
            with self._butler_lock:
                self.setup.prepare(runs, exposures=[p.exposure for p in queued])
        except Exception as exc:
            log_event(log, "butler.prepare_failed", error=str(exc)[:200])

    def arriving(self) -> AbstractContextManager[None]:
        """The next batch waits (at most ``gather`` seconds) for this thread's ``register``."""
        return self._batches.arriving()

    def _flush(self, batch: list[_Pending]) -> None:
        """Steps 1-3 (module doc) for a batch; every item ends with a result or error."""
        started = time.perf_counter()
        try:
            ok = self._checked(batch)
        except BaseException as exc:
            for p in batch:
                p.error = exc
            ok = []
        if ok:
            through = self._butler_step(ok)
            if through:
                self._companion_step(through)
        seconds = time.perf_counter() - started
        stats = self._stats
        stats["batches"] += 1
        stats["files"] += len(batch)
        stats["largest_batch"] = max(stats["largest_batch"], len(batch))
        stats["seconds"] += seconds
        log_event(log, "butler.batch", files=len(batch), ingest_ms=round(seconds * 1000, 2))

    def _checked(self, batch: Sequence[_Pending]) -> list[tuple[_Pending, Registration]]:
        """Step 1: each item with its registration (``created``: new to the companion)."""
        planned = [(p, self._planned(p.record)) for p in batch]
        known = self._retrying(lambda: self.companion({reg.dataset_id for _, reg in planned}))
        ok = []
        for p, reg in planned:
            row = known.get(reg.dataset_id)
            if row is not None and (conflict := checksum_conflict(p.record, row)):
                p.error = conflict
                continue
            ok.append((p, reg if row is None else dataclasses.replace(reg, created=False, uri=row["uri"])))
        return ok

    def _butler_step(
        self, ok: Sequence[tuple[_Pending, Registration]]
    ) -> list[tuple[_Pending, Registration]]:
        """Step 2: the items the Butler now holds (the others get their error); a failed
        multi-exposure batch is retried per exposure (one exposure's fault fails it alone), unless
        the Butler's database is unreachable: the same for all, each try waits out its retries."""
        try:
            refused = self._in_butler(ok)
        except Exception as exc:
            if not isinstance(exc, ObsIngestError):  # the repository may have changed
                self.setup.forget()
            groups: dict[tuple[str, int], list[tuple[_Pending, Registration]]] = {}
            for item in ok:
                groups.setdefault((item[0].exposure.instrument, item[0].exposure.exposure), []).append(item)
            if len(groups) > 1 and not _outage(exc):
                return [held for group in groups.values() for held in self._butler_step(group)]
            error = exc if isinstance(exc, ObsIngestError) else _unavailable(exc, self.repo)
            refused = {id(p): error for p, _ in ok}
        for p, _ in ok:
            if id(p) in refused:
                p.error = refused[id(p)]
        return [(p, registration) for p, registration in ok if id(p) not in refused]

    def _in_butler(self, ok: Sequence[tuple[_Pending, Registration]]) -> dict[int, Exception]:
        """Set-up, then one ingest; returns the refused items (by ``id``). When every file is new
        to the companion the ingest skips the costly existence query; if the Butler had one
        anyway, the batch is rolled back and done again with it."""
        with self._butler_lock:
            self.setup.prepare([reg.run for _, reg in ok], exposures=[p.exposure for p, _ in ok])
            if len(self._seen_exposures) > 10_000:
                self._seen_exposures.clear()
            self._seen_exposures.update((p.exposure.instrument, p.exposure.exposure) for p, _ in ok)
            if all(registration.created for _, registration in ok):
                try:
                    with self.butler.transaction():
                        return self._ingest(ok, look=False)
                except ObsIngestError:
                    raise
                except Exception as exc:
                    log_event(log, "butler.ingest_retried_with_lookup", error=str(exc)[:200])
            with self.butler.transaction():
                return self._ingest(ok, look=True)

    def _ingest(self, ok: Sequence[tuple[_Pending, Registration]], look: bool) -> dict[int, Exception]:
        from lsst.daf.butler import DatasetIdGenEnum, DatasetRef, FileDataset

        dtype = self.setup.dataset_type()
        refused: dict[int, Exception] = {}
        items: list[tuple[_Pending, Any]] = []
        for p, registration in ok:
            data_id = p.record.data_id
            coordinate = self._data_id(dtype, data_id.instrument, data_id.exposure, data_id.detector)
            ref = DatasetRef(
                dtype,
                coordinate,
                run=registration.run,
                id_generation_mode=DatasetIdGenEnum.DATAID_TYPE_RUN,
                # skip standardizing it again against the dataset type (costly per CCD)
                conform=coordinate.dimensions != dtype.dimensions,
            )
            if ref.id != registration.dataset_id:
                raise ButlerConflict(
                    f"{data_id.key}: the Butler's DATAID_TYPE_RUN id {ref.id} differs from "
                    f"obsingest's {registration.dataset_id} (dataset type or run template?)"
                )
            items.append((p, ref))
        datasets = []
        # a CCD delivered twice in one batch is ingested once (two FileDatasets fail the ingest)
        batched: dict[uuid.UUID, str] = {}
        wanted = [
            (ref.run, p.record.data_id.instrument, p.record.data_id.exposure, ref.id) for p, ref in items
        ]
        existing = self.held_uris(wanted) if look else {}
        for p, ref in items:
            uri = existing.get(ref.id, batched.get(ref.id))
            if uri is None:
                batched[ref.id] = p.record.uri
                name = raw_formatter(p.record.data_id.instrument, self.butler_settings.formatter)
                datasets.append(FileDataset(p.record.uri, [ref], formatter=_class_of(name)))
            elif uri != p.record.uri:
                refused[id(p)] = ChecksumConflict(
                    f"{p.record.data_id.key}: the Butler at {self.repo} already has "
                    f"dataset {ref.id} at {uri}; refusing {p.record.uri}"
                )
        if datasets:
            self.butler.ingest(
                *datasets,
                transfer="direct",
                record_validation_info=self.butler_settings.record_validation_info,
                skip_existing=look,
            )
        return refused

    def _data_id(self, dtype: Any, instrument: str, exposure: int, detector: int) -> Any:
        """An expanded data id (records attached), so the ingest does not query them back."""
        from lsst.daf.butler import DataCoordinate

        records = self.setup.exposure_records.get((instrument, exposure))
        detector_record = self.setup.detector_records.get((instrument, detector))
        if records is None or detector_record is None:
            return DataCoordinate.standardize(
                instrument=instrument, exposure=exposure, detector=detector, universe=self.butler.dimensions
            )
        dimensions = dtype.dimensions
        given: dict[str, int | str] = {"instrument": instrument, "exposure": exposure, "detector": detector}
        plain = DataCoordinate.from_required_values(
            dimensions, tuple(given[name] for name in dimensions.required)
        )
        return plain.expanded({**records, "detector": detector_record})

    def _companion_step(self, held: Sequence[tuple[_Pending, Registration]]) -> None:
        """Step 3; a message that cannot be built fails only its caller. Refused with dimension
        rows skipped as committed (gone: a restore), it writes them again (``Registry.register``)."""
        rows = [(planned.run, p.exposure) for p, planned in held]
        try:
            results = self._rows_written_if_gone(
                lambda: self._tx(lambda conn: self._companion_records(conn, held)), rows
            )
        except Exception as exc:
            for run, exposure in rows:
                self._forget(run, exposure)
            for p, _ in held:
                p.error = exc
            return
        for (p, planned), (registration, error) in zip(held, results, strict=True):
            p.result, p.error = registration, error
            self._remember(planned.run, p.exposure)

    def _companion_records(
        self, conn: Connection, held: Sequence[tuple[_Pending, Registration]]
    ) -> list[tuple[Registration | None, BaseException | None]]:
        """(registration, error) per item: the new in one statement per table, the others
        (redelivery, another writer) one by one, which tells a duplicate from a ChecksumConflict."""
        first = {  # the first item of each exposure writes its rows
            (planned.run, p.exposure.instrument, p.exposure.exposure): (planned.run, p.exposure)
            for p, planned in reversed(held)
        }
        for run, exposure in first.values():
            self._write_dimensions(conn, run, exposure)
        now = datetime.now(UTC)
        fresh: dict[uuid.UUID, tuple[int, Registration]] = {}  # a CCD twice in the batch: its first
        for i, (p, planned) in enumerate(held):
            if planned.created:
                reg = dataclasses.replace(planned, registered_time=now, uri=p.record.uri)
                fresh.setdefault(planned.dataset_id, (i, reg))
        inserted = self._insert_new(
            conn, {ds_id: (held[i][0].record, reg) for ds_id, (i, reg) in fresh.items()}
        )
        # not inserted: another writer's (``_register`` below tells a duplicate from a conflict)
        done = {i: reg for ds_id, (i, reg) in fresh.items() if ds_id in inserted}
        out: dict[int, tuple[Registration | None, BaseException | None]] = {}
        for i, (p, _) in enumerate(held):
            if i not in done:
                try:
                    done[i] = self._register(conn, p.record, p.exposure, True)
                except ChecksumConflict as exc:  # another process's bytes won the race
                    out[i] = (None, exc)
        messages = []
        for i, reg in done.items():
            announce = held[i][0].announce
            if announce is None or not reg.created:
                out[i] = (reg, None)
                continue
            try:
                messages.append((i, reg, announce(reg)))
            except Exception as exc:  # fails its caller only; its redelivery announces it
                out[i] = (None, exc)
        rows = insert_rows(conn, [(reg.dataset_id, m) for _, reg, m in messages], now, OUTBOX_LEASE_SECONDS)
        for i, reg, _ in messages:
            out[i] = (dataclasses.replace(reg, outbox_id=rows[reg.dataset_id]), None)
        return [out[i] for i in range(len(held))]

    def batch_stats(self) -> dict[str, float]:
        """How registrations were grouped into Butler transactions so far."""
        s = self._stats
        return {**s, "mean_batch": s["files"] / s["batches"] if s["batches"] else 0.0}


@cache
def _class_of(name: str) -> Any:
    """A formatter class by name, imported once (the ingest would import it per file)."""
    from lsst.utils.introspection import get_class_of

    return get_class_of(name)


def _unavailable(exc: Exception, repo: Any) -> ObsIngestError:
    """The Butler's database or datastore failed: retry later."""
    return as_exhausted(exc, "registry", f"Butler repository {repo}") or (
        RegistryUnavailable(f"Butler repository {repo}: {type(exc).__name__}: {exc}")
    )


def _outage(exc: BaseException) -> bool:
    """The Butler's database unreachable (directly, or the set-up's retries gave up on it)."""
    last = exc.last if isinstance(exc, RetriesExhausted) else exc
    return db_errors.classify(last) is db_errors.Verdict.TRANSIENT
