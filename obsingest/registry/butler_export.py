"""Export obsingest's registry as a Butler export file (``YamlRepoExportBackend``, what ``butler
export`` writes): dimension records, runs, the ``raw`` dataset type and every dataset with its id
(= the Butler's DATAID_TYPE_RUN id) and object URI, for ``butler import REPO FILE --transfer
direct``. ``butler import`` imports each dataset's formatter, so the file is written for its
reader, ``target`` (``TARGETS``; docs/butler.md says what each gives and why ``rubin`` is the default).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import select

from obsingest import camera
from obsingest.registry import butler_setup, tables
from obsingest.registry.butler_repo import FALLBACK_FORMATTER, RAW_DIMENSIONS, RAW_FITS_STORAGE_CLASS
from obsingest.registry.registry import ExposureRecord, Registry

#: target -> (formatter of every raw, None: the instrument's obs_lsst one; storage class)
TARGETS: dict[str, tuple[str | None, str]] = {
    "rubin": (None, "Exposure"),
    "daf_butler": ("lsst.daf.butler.FormatterV2", "Exposure"),
    "obsingest": (FALLBACK_FORMATTER, RAW_FITS_STORAGE_CLASS),
}


def formatter_for(instrument: str, target: str, formatters: Mapping[str, str]) -> str:
    """The formatter class an export for ``target`` records for ``instrument``'s raws."""
    if instrument in formatters:
        return formatters[instrument]
    if target not in TARGETS:
        raise ValueError(f"unknown export target {target!r} (one of {', '.join(TARGETS)})")
    chosen = TARGETS[target][0]
    return chosen if chosen is not None else camera.instrument(instrument).raw_formatter


def export_butler(
    registry: Registry,
    path: str | Path,
    storage_class: str | None = None,
    target: str = "rubin",
    formatters: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Write the Butler export of ``registry`` to ``path``; returns what it holds, by kind.
    ``formatters`` ({instrument: class}) and ``storage_class`` override what ``target`` picks."""
    from lsst.daf.butler import DatasetIdGenEnum, DatasetRef, DatasetType, DimensionUniverse, FileDataset
    from lsst.daf.butler.registry.interfaces import RunRecord
    from lsst.daf.butler.transfers import YamlRepoExportBackend

    formatters = dict(formatters or {})
    storage_class = storage_class or TARGETS.get(target, (None, "Exposure"))[1]
    universe = DimensionUniverse()
    datasets, exposures = _read(registry)
    instruments = sorted({row["instrument"] for row in datasets})
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name in instruments:
        instrument, detectors = butler_setup.instrument_records(name)
        records["instrument"].append(instrument)
        records["detector"] += detectors
    seen: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for exposure in exposures:
        for element, record in butler_setup.exposure_records(exposure).items():
            key = tuple(v for k, v in record.items() if k in ("instrument", "id", "name"))
            if key not in seen[element]:
                seen[element].add(key)
                records[element].append(butler_setup.with_timespan(record))
    dtype = DatasetType(registry.settings.dataset_type, RAW_DIMENSIONS, storage_class, universe=universe)
    by_run: dict[str, list[Any]] = defaultdict(list)
    for row in datasets:
        ref = DatasetRef(
            dtype,
            {k: row[k] for k in RAW_DIMENSIONS},  # type: ignore[arg-type]  # it standardizes a dict
            run=row["run"],
            id=row["id"],
        )
        check = DatasetRef(
            dtype, ref.dataId, run=row["run"], id_generation_mode=DatasetIdGenEnum.DATAID_TYPE_RUN
        )
        if check.id != ref.id:
            raise ValueError(
                f"dataset {row['id']} ({row['instrument']} {row['exposure']} {row['detector']}): "
                f"not the Butler's DATAID_TYPE_RUN id {check.id} for run {row['run']!r}"
            )
        fmt = formatter_for(row["instrument"], target, formatters)
        by_run[row["run"]].append(FileDataset(row["uri"], [ref], formatter=fmt))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as stream:
        backend = YamlRepoExportBackend(stream, universe)
        # dependency order: what a record refers to comes first
        for element in ("instrument", "detector", "physical_filter", "group", "day_obs", "exposure"):
            if records[element]:
                cls = universe[element].RecordClass
                backend.saveDimensionData(universe[element], *(cls(**r) for r in records[element]))
        for run in sorted(by_run):
            backend.saveCollection(RunRecord(key=run, name=run), None)
        for run in sorted(by_run):
            backend.saveDatasets(dtype, run, *by_run[run])
        backend.finish()
    counts = {element: len(rows) for element, rows in records.items()}
    counts.update({"runs": len(by_run), "datasets": len(datasets)})
    return counts


def _read(registry: Registry) -> tuple[list[dict[str, Any]], list[ExposureRecord]]:
    """Datasets (with their URI) and the exposures they belong to, from obsingest's tables."""
    d, r, e = tables.dataset, tables.datastore_record, tables.exposure
    query = (
        select(d.c.id, d.c.run, d.c.instrument, d.c.exposure, d.c.detector, r.c.uri)
        .join(r, r.c.dataset_id == d.c.id)
        .where(d.c.dataset_type == registry.settings.dataset_type)
        .order_by(d.c.instrument, d.c.exposure, d.c.detector)
    )
    names = [c.name for c in e.columns if c.name not in ("instrument", "id", "day_obs")]
    with registry.engine.connect() as conn:
        datasets = [dict(row) for row in conn.execute(query).mappings()]
        wanted = {(row["instrument"], row["exposure"]) for row in datasets}
        exposures = [
            ExposureRecord(
                instrument=row["instrument"],
                exposure=row["id"],
                day_obs=row["day_obs"],
                **{name: row[name] for name in names if name != "header_warnings"},
                header_warnings=tuple(json.loads(row["header_warnings"] or "[]")),
            )
            for row in conn.execute(select(e).order_by(e.c.instrument, e.c.id)).mappings()
            if (row["instrument"], row["id"]) in wanted
        ]
    return datasets, exposures
