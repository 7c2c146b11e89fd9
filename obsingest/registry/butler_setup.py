"""What a Butler repository needs before a raw can be ingested, set up outside any transaction.

daf_butler refuses to create tables inside ``butler.transaction()``, so each step (dataset type,
run, instrument and detectors as obs_lsst registers them, each exposure's records) runs on its
own before the ingest, idempotently; an exposure record that differs from the headers' is a
``ButlerConflict``. A step that loses a race with another process is done again and finds the
winner's rows; done steps are remembered per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from obsingest.errors import ObsIngestError, PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.registry import butler_records
from obsingest.registry.butler_records import with_timespan
from obsingest.registry.butler_repo import RAW_DIMENSIONS, ButlerSettings, repo_of
from obsingest.registry.registry import ExposureRecord
from obsingest.retry import RetryPolicy, Transient, call_with_retries
from obsingest.settings import run_name

log = get_logger("obsingest.registry.butler_setup")

T = TypeVar("T")

#: a lost race is over in milliseconds; a database that stays down is the caller's retry
SETUP_RETRY = RetryPolicy(max_attempts=6, base_delay=0.05, max_delay=0.5, deadline=10.0)
#: an exposure's other dimension records, inserted in this order (before its exposure record)
_ELEMENTS = ("physical_filter", "group", "day_obs")


class ButlerConflict(PermanentError, reason="butler-conflict"):
    """The Butler already holds a different definition (an exposure record, a dataset type)."""


def _race(exc: BaseException) -> Transient | None:
    """Worth doing again: anything but a refusal of ours or a conflicting definition."""
    from lsst.daf.butler.registry import ConflictingDefinitionError

    if isinstance(exc, ObsIngestError | ConflictingDefinitionError):
        return None
    return Transient("butler-setup")


class ButlerSetup:
    """Idempotent, race-safe set-up of one repository (see module doc)."""

    def __init__(self, butler: Any, dataset_type: str, storage_class: str) -> None:
        self.butler = butler
        self.dataset_type_name = dataset_type
        self.storage_class = storage_class
        self._lock = threading.Lock()
        self._dtype: Any = None
        self._runs: set[str] = set()
        self._instruments: dict[str, Any] = {}
        self.detector_records: dict[tuple[str, int], Any] = {}
        #: per (instrument, exposure): the DimensionRecords a data id is expanded with
        self.exposure_records: dict[tuple[str, int], dict[str, Any]] = {}
        #: physical_filter, group and day_obs records this process wrote, by (instrument, name)
        self._written: dict[str, dict[tuple[Any, ...], Any]] = {e: {} for e in _ELEMENTS}

    def _do(self, what: str, fn: Callable[[], T]) -> T:
        def retried(a: Any) -> None:
            log_event(log, "butler.setup_retried", what=what, error=str(a.error)[:200])

        return call_with_retries(lambda _remaining: fn(), _race, SETUP_RETRY, what=what, on_retry=retried)

    def prepare(self, runs: Iterable[str], instruments: Iterable[str]) -> dict[str, Any]:
        """Dataset type, runs, instruments and their detectors; what was ensured, for humans."""
        dtype = self.dataset_type()
        runs = sorted(set(runs))
        for run in runs:
            self.run(run)
        instruments = sorted(set(instruments))
        for name in instruments:
            self.instrument(name)
        return {
            "dataset_type": dtype.name,
            "storage_class": dtype.storageClass_name,
            "runs": runs,
            "instruments": instruments,
        }

    def forget(self) -> None:
        """Ask the repository again next time (after a failure that may mean it changed)."""
        with self._lock:
            self._dtype = None
            self._runs.clear()
            self._instruments.clear()
            self.exposure_records.clear()
            for written in self._written.values():
                written.clear()

    def dataset_type(self) -> Any:
        """The raw dataset type, registered with ``storage_class`` if the repository lacks it."""
        if self._dtype is not None:
            return self._dtype
        from lsst.daf.butler import DatasetType
        from lsst.daf.butler.registry import MissingDatasetTypeError

        name = self.dataset_type_name

        def ensure() -> Any:
            try:
                return self.butler.get_dataset_type(name)
            except MissingDatasetTypeError:
                pass
            dtype = DatasetType(name, RAW_DIMENSIONS, self.storage_class, universe=self.butler.dimensions)
            self.butler.registry.registerDatasetType(dtype)
            log_event(log, "butler.dataset_type_registered", name=name, sc=self.storage_class)
            return self.butler.get_dataset_type(name)

        dtype = self._do(f"dataset type {name}", ensure)
        required = sorted(dtype.dimensions.required)
        if required != sorted(RAW_DIMENSIONS):
            raise ButlerConflict(
                f"the Butler's dataset type {name!r} has dimensions {required}, not {list(RAW_DIMENSIONS)}"
            )
        self._dtype = dtype
        return dtype

    def run(self, run: str) -> None:
        """The run collection exists (registered if not)."""
        if run in self._runs:
            return
        from lsst.daf.butler import CollectionType

        def ensure() -> None:
            self.butler.registry.registerCollection(run, CollectionType.RUN)
            if self.butler.registry.getCollectionType(run) is not CollectionType.RUN:
                raise ButlerConflict(f"the Butler's collection {run!r} is not a RUN collection")

        self._do(f"run {run}", ensure)
        self._runs.add(run)

    def instrument(self, instrument: str) -> Any:
        """Instrument and detector records; the instrument's DimensionRecord."""
        found = self._instruments.get(instrument)
        if found is not None:
            return found
        record, detectors = butler_records.instrument_records(instrument)

        def ensure() -> None:
            registry = self.butler.registry
            _sync(registry, "instrument", record)
            registry.insertDimensionData("detector", *detectors, skip_existing=True)

        self._do(f"instrument {instrument}", ensure)
        universe = self.butler.dimensions
        detector_class = universe["detector"].RecordClass
        for det in detectors:
            self.detector_records[(instrument, det["id"])] = detector_class(**det)
        found = universe["instrument"].RecordClass(**record)
        self._instruments[instrument] = found
        return found

    def exposure(self, exposure: ExposureRecord) -> None:
        """physical_filter, group, day_obs and exposure records of one exposure."""
        self.exposures([exposure])

    def exposures(self, exposures: Iterable[ExposureRecord]) -> None:
        """The records of the exposures this process has not set up yet: physical_filter, group
        and day_obs of all of them in one insert per element (skipping ones already written),
        then each exposure record, synced (compared with one already there)."""
        todo: dict[tuple[str, int], ExposureRecord] = {}
        for exposure in exposures:
            key = (exposure.instrument, exposure.exposure)
            if key not in self.exposure_records:
                todo.setdefault(key, exposure)
        if not todo:
            return
        instruments = {key[0]: self.instrument(key[0]) for key in todo}
        made = {key: butler_records.exposure_records(exp) for key, exp in todo.items()}
        new: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {e: {} for e in _ELEMENTS}
        for records in made.values():
            for element, found in new.items():
                name = _name(records[element])
                if name not in self._written[element]:
                    found[name] = records[element]
        new["day_obs"] = {name: with_timespan(r) for name, r in new["day_obs"].items()}
        timed = {key: with_timespan(records["exposure"]) for key, records in made.items()}

        def ensure() -> None:
            registry = self.butler.registry
            for element, records in new.items():
                if records:
                    registry.insertDimensionData(element, *records.values(), skip_existing=True)
            for record in timed.values():
                _sync(registry, "exposure", record)

        self._do(f"exposures {sorted(todo)}", ensure)
        universe = self.butler.dimensions
        for element, new_records in new.items():
            written = self._written[element]
            if len(written) > 10_000:
                written.clear()
            for name, record in new_records.items():
                written[name] = universe[element].RecordClass(**record)
        if len(self.exposure_records) > 10_000:
            self.exposure_records.clear()
        for key, records in made.items():
            self.exposure_records[key] = {
                "instrument": instruments[key[0]],
                "exposure": universe["exposure"].RecordClass(**timed[key]),
                "band": universe["band"].RecordClass(name=records["physical_filter"]["band"]),
            } | {element: self._written[element][_name(records[element])] for element in _ELEMENTS}


def _name(record: dict[str, Any]) -> tuple[Any, ...]:
    """A physical_filter, group or day_obs record's key: (instrument, name or id)."""
    return (record["instrument"], record.get("name", record.get("id")))


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


def set_up_repository(settings: Any, instruments: Iterable[str]) -> dict[str, Any]:
    """``obsingest setup --registry butler:<repo>``: what the first registrations would set up,
    done up front on the repository ``settings.url`` names (a ``RegistrySettings``): the raw
    dataset type, the run of each instrument, the instruments and their detectors."""
    from lsst.daf.butler import Butler

    instruments = sorted(set(instruments))
    butler = Butler.from_config(repo_of(settings.url), writeable=True)
    try:
        setup = ButlerSetup(butler, settings.dataset_type, ButlerSettings().storage_class)
        return setup.prepare([run_name(settings.run, i) for i in instruments], instruments)
    finally:
        butler.close()
