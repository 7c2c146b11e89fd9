"""What a Butler-backed registry holds, read from the Butler itself (the registry of record):
listings are its raws with the companion's details (``companion: false`` when it lacks them);
reconcile counts an object registered only when the Butler holds it at that URI *and* the
companion recorded it (any other goes to the idempotent register service, which completes either).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import Connection, Engine, select

from obsingest.registry import tables
from obsingest.registry.audit import RegistryAudit, chunks
from obsingest.registry.engine import open_butler
from obsingest.registry.registry import jsonable
from obsingest.settings import RegistrySettings, run_name

_EXPOSURES = 5  # a listing's batch: ~1,000 raws of a 189-CCD camera


class ButlerReads:
    """``ButlerRegistry``'s queries of the Butler (raws in the configured runs)."""

    butler: Any
    engine: Engine
    settings: RegistrySettings
    _butler_lock: threading.RLock  # the ingest holds it while it asks

    def _raws(self, run: str, where: str, bind: dict[str, Any]) -> list[Any]:
        """The raws in ``run`` that ``where`` picks (none before any was ingested)."""
        from lsst.daf.butler.registry import MissingCollectionError, MissingDatasetTypeError

        with self._butler_lock:
            try:
                found = self.butler.registry.queryDatasets(
                    self.settings.dataset_type, collections=run, where=where, bind=bind
                )
                return list(found)
            except (MissingCollectionError, MissingDatasetTypeError):
                return []

    def refs(self, instrument: str | None = None, exposure: int | None = None) -> list[Any]:
        """The raws the Butler holds in the configured runs of the instruments it knows."""
        with self._butler_lock:
            names = [r.name for r in self.butler.registry.queryDimensionRecords("instrument")]
        where = "instrument = inst AND exposure = exp" if exposure else "instrument = inst"
        out: list[Any] = []
        for inst in sorted(n for n in names if not instrument or n == instrument):
            bind = {"inst": inst, "exp": exposure} if exposure else {"inst": inst}
            out += self._raws(run_name(self.settings.run, inst), where, bind)
        return out

    def uris(self, refs: list[Any]) -> dict[uuid.UUID, str]:
        """dataset id -> the URI the Butler's datastore records for it (one query)."""
        if not refs:
            return {}
        with self._butler_lock:
            found = self.butler.get_many_uris(refs)
        return {ref.id: str(uris.primaryURI) for ref, uris in found.items() if uris.primaryURI}

    def count_datasets(self) -> int:
        return len(self.refs())

    def iter_datasets(
        self, instrument: str | None = None, exposure: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Rows as ``Registry.datasets`` gives them, the Butler's raws, in data id order: read
        ``_EXPOSURES`` exposures at a time, so memory stays flat with history."""
        with self._butler_lock:
            names = [r.name for r in self.butler.registry.queryDimensionRecords("instrument")]
        for inst in sorted(n for n in names if not instrument or n == instrument):
            ids = [exposure] if exposure is not None else self._exposures(inst)
            for exps in chunks(ids, _EXPOSURES):
                where = "instrument = inst AND exposure IN (exps)"
                refs = self._raws(run_name(self.settings.run, inst), where, {"inst": inst, "exps": exps})
                yield from sorted(self._rows(refs), key=lambda r: (r["exposure"], r["detector"]))

    def _exposures(self, instrument: str) -> list[int]:
        with self._butler_lock:
            found = self.butler.registry.queryDimensionRecords("exposure", instrument=instrument)
            return sorted({r.id for r in found})

    def _rows(self, refs: list[Any]) -> Iterator[dict[str, Any]]:
        uris = self.uris(refs)
        companion = self.companion({ref.id for ref in refs})
        for ref in refs:
            mine = companion.get(ref.id, {})
            yield (
                {"id": str(ref.id), "dataset_type": ref.datasetType.name, "run": ref.run}
                | {k: ref.dataId[k] for k in ("instrument", "exposure", "detector")}
                | {"ingest_time": mine.get("ingest_time"), "uri": uris.get(ref.id, "")}
                | {k: mine.get(k) for k in ("size", "checksum", "transport", "readout_time")}
                | {"companion": bool(mine)}
            )

    def companion(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
        """What the companion recorded of the datasets ``ids`` (JSON-ready), by dataset id."""
        d, r = tables.dataset, tables.datastore_record
        wanted = sorted(ids)
        out: dict[uuid.UUID, dict[str, Any]] = {}
        with self.engine.connect() as conn:
            for chunk in chunks(wanted):
                query = (
                    select(d.c.id, d.c.ingest_time, r.c.uri, r.c.size, r.c.checksum)
                    .add_columns(r.c.transport, r.c.readout_time)
                    .join(r, r.c.dataset_id == d.c.id)
                    .where(d.c.id.in_(chunk))
                )
                for row in conn.execute(query).mappings():
                    out[row["id"]] = jsonable({k: v for k, v in row.items() if k != "id"})
        return out

    def held_uris(self, wanted: Iterable[tuple[str, str, int, uuid.UUID]]) -> dict[uuid.UUID, str]:
        """The Butler's URI of each (run, instrument, exposure, dataset id) it holds: one query
        per run and instrument."""
        groups: dict[tuple[str, str], dict[uuid.UUID, int]] = {}
        for run, instrument, exposure, ds_id in wanted:
            groups.setdefault((run, instrument), {})[ds_id] = exposure
        refs: list[Any] = []
        for (run, instrument), ids in groups.items():
            bind = {"inst": instrument, "exps": sorted(set(ids.values()))}
            refs += [
                ref
                for ref in self._raws(run, "instrument = inst AND exposure IN (exps)", bind)
                if ref.id in ids
            ]
        return self.uris(refs)


class ButlerAudit(RegistryAudit):
    """Reconcile's queries; ``registered_uris``: the companion has recorded them and the Butler
    holds them at that URI."""

    def __init__(
        self, engine: Engine, retrying: Callable[[Callable[[], Any]], Any] | None, reads: ButlerReads
    ) -> None:
        super().__init__(engine, retrying)
        self.reads = reads

    def registered_uris(self, uris: Iterable[str]) -> set[str]:
        d, r = tables.dataset, tables.datastore_record
        query = select(d.c.id, d.c.instrument, d.c.exposure, d.c.run, r.c.uri).join(
            r, r.c.dataset_id == d.c.id
        )
        wanted = sorted(set(uris))

        def rows_of(conn: Connection) -> list[dict[str, Any]]:
            return [
                dict(m)
                for chunk in chunks(wanted)
                for m in conn.execute(query.where(r.c.uri.in_(chunk))).mappings()
            ]

        rows = self._run(rows_of)
        if not rows:
            return set()
        held = self.reads.held_uris((x["run"], x["instrument"], int(x["exposure"]), x["id"]) for x in rows)
        return {x["uri"] for x in rows if held.get(x["id"]) == x["uri"]}


class ButlerConfirmation:
    """For the presence reader on a ``butler:`` registry: a CCD the companion reports registered
    is registered only if the Butler holds its dataset."""

    def __init__(self, repo: str) -> None:
        self.butler = open_butler(repo)
        self._lock = threading.Lock()

    def __call__(self, ccd: Any) -> Any:
        if not ccd.registered or ccd.dataset_id is None:
            return ccd
        with self._lock:
            held = self.butler.get_dataset(uuid.UUID(ccd.dataset_id)) is not None
        if held:
            return ccd
        return type(ccd)(ccd.instrument, ccd.exposure, ccd.detector, ccd.day_obs, registered=False)

    def close(self) -> None:
        self.butler.close()
