"""What a Butler repository needs before a raw can be ingested, set up outside any transaction.

The dimension records are plain dicts (``exposure_records``, ``instrument_records``), what
obs_lsst would write for the same raws; the export makes DimensionRecords of them too.
daf_butler refuses to create tables inside ``butler.transaction()``, so each step (dataset type,
run, instrument and detectors as obs_lsst registers them, each exposure's records) runs on its
own before the ingest, idempotently; an exposure record that differs from the headers' is a
``ButlerConflict``. A step that loses a race with another process is done again and finds the
winner's rows; done steps are remembered per process.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from obsingest import camera
from obsingest.errors import ObsIngestError, PermanentError
from obsingest.logs import get_logger, log_event
from obsingest.registry.butler_repo import RAW_DIMENSIONS, ButlerSettings, ensure_dataset_type, repo_of
from obsingest.registry.engine import open_butler
from obsingest.registry.registry import ExposureRecord
from obsingest.retry import RetryPolicy, Transient, call_with_retries
from obsingest.settings import run_name
from obsingest.timescales import as_utc, utc_to_tai

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
    """Idempotent, race-safe set-up of one repository."""

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

    def prepare(
        self, runs: Iterable[str], instruments: Iterable[str] = (), exposures: Iterable[ExposureRecord] = ()
    ) -> dict[str, Any]:
        """Dataset type, runs, instruments (with detectors) and exposures; what was ensured."""
        dtype = self.dataset_type()
        runs = sorted(set(runs))
        for run in runs:
            self.run(run)
        instruments = sorted(set(instruments))
        for name in instruments:
            self.instrument(name)
        self.exposures(exposures)
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
        name = self.dataset_type_name
        dtype = self._do(
            f"dataset type {name}", lambda: ensure_dataset_type(self.butler, name, self.storage_class)
        )
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
        record, detectors = instrument_records(instrument)

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
        self.exposures([exposure])

    def exposures(self, exposures: Iterable[ExposureRecord]) -> None:
        """The records of exposures not set up yet: physical_filter, group and day_obs in one
        insert per element, then each exposure record, synced (compared with one already there)."""
        todo: dict[tuple[str, int], ExposureRecord] = {}
        for exposure in exposures:
            key = (exposure.instrument, exposure.exposure)
            if key not in self.exposure_records:
                todo.setdefault(key, exposure)
        if not todo:
            return
        instruments = {key[0]: self.instrument(key[0]) for key in todo}
        made = {key: exposure_records(exp) for key, exp in todo.items()}
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
    """``obsingest setup --registry butler:<repo>``: what the first registrations would set up
    (dataset type, runs, instruments and detectors), done up front."""
    instruments = sorted(set(instruments))
    butler = open_butler(repo_of(settings.url), writeable=True)
    try:
        setup = ButlerSetup(butler, settings.dataset_type, ButlerSettings().storage_class)
        return setup.prepare([run_name(settings.run, i) for i in instruments], instruments)
    finally:
        butler.close()


#: obs_lsst's day_obs offset for the Simonyi telescope and ComCam/LATISS: the observing day
#: rolls over at 12:00 (LsstCamTranslator.observing_date_to_offset)
DAY_OBS_OFFSET = timedelta(hours=12)
#: obs_lsst's placeholder filter for a raw without one (filters.py ``unknown``)
UNKNOWN_FILTER = "unknown"


def instrument_records(instrument: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(instrument record, detector records) of ``instrument``, as obs_lsst registers them."""
    inst = camera.instrument(instrument)
    return inst.record(), [inst.detector_record(d) for d in inst.detector_ids]


def day_obs_timespan(day_obs: int) -> tuple[datetime, datetime]:
    """The [begin, end) of an observing day: YYYY-MM-DD 12:00 to the next day's 12:00."""
    day = datetime.strptime(str(day_obs), "%Y%m%d").replace(tzinfo=UTC)
    return day + DAY_OBS_OFFSET, day + DAY_OBS_OFFSET + timedelta(days=1)


def exposure_records(exp: ExposureRecord) -> dict[str, dict[str, Any]]:
    """The records an exposure needs, by element: physical_filter, group, day_obs, exposure;
    ``timespan`` values are (begin, end) UTC datetimes or None."""
    inst = camera.instrument(exp.instrument)
    seq_num = exp.seq_num if exp.seq_num is not None else exp.exposure % 100_000
    physical_filter = exp.physical_filter or UNKNOWN_FILTER
    band = exp.band or (UNKNOWN_FILTER if physical_filter == UNKNOWN_FILTER else None)
    if band is None:
        band = next((b for b, f in inst.filters.items() if f == physical_filter), physical_filter)
    group = exp.group_name or str(exp.exposure)
    begin = exp.obs_start
    end = exp.obs_end
    if end is None and begin is not None and exp.exposure_time is not None:
        with contextlib.suppress(OverflowError):  # no such instant: no timespan
            end = begin + timedelta(seconds=exp.exposure_time)
    return {
        "physical_filter": {"instrument": exp.instrument, "name": physical_filter, "band": band},
        "group": {"instrument": exp.instrument, "name": group},
        "day_obs": {
            "instrument": exp.instrument,
            "id": exp.day_obs,
            "timespan": _held(*day_obs_timespan(exp.day_obs)),
        },
        "exposure": {
            "instrument": exp.instrument,
            "id": exp.exposure,
            "obs_id": exp.obs_id or f"{inst.obsid_prefix}_O_{exp.day_obs}_{seq_num:06d}",
            "physical_filter": physical_filter,
            "group": group,
            "observation_type": exp.observation_type or "unknown",
            "observation_reason": exp.observation_reason or "unknown",
            "seq_num": seq_num,
            "seq_start": seq_num,
            "seq_end": seq_num,
        }
        | {name: getattr(exp, name) for name in _AS_GIVEN}
        | {"timespan": _held(begin, end)},
    }


#: the UTC instants a Butler timespan holds (daf_butler: TAI from 1970 to 2100; TAI - UTC < 1 min)
_BUTLER_TIMES = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2099, 12, 31, tzinfo=UTC))


def _held(begin: datetime | None, end: datetime | None) -> tuple[datetime, datetime] | None:
    """(begin, end) as a timespan value; None (unknown) when the Butler cannot hold either: its
    refusal would fail the set-up of a whole batch, other exposures' CCDs too, at every retry."""
    if begin is None or end is None:
        return None
    low, high = _BUTLER_TIMES
    return (begin, end) if low <= as_utc(begin) and as_utc(end) <= high else None


#: the exposure record's fields the headers give as they are
_AS_GIVEN: tuple[str, ...] = (
    "day_obs",
    "exposure_time",
    "dark_time",
    "target_name",
    "science_program",
    "tracking_ra",
)
_AS_GIVEN += ("tracking_dec", "sky_angle", "azimuth", "zenith_angle", "has_simulated", "can_see_sky")


def with_timespan(record: dict[str, Any]) -> dict[str, Any]:
    """(begin, end) UTC datetimes -> a Butler Timespan (TAI, as daf_butler stores times)."""
    value = record.get("timespan")
    if value is None:
        return record
    from astropy.time import Time
    from lsst.daf.butler import Timespan

    # TAI from the leap-second table (timescales.utc_to_tai): the same nanoseconds as astropy's
    # Time(utc).tai, at half the cost
    begin, end = (Time(utc_to_tai(as_utc(t)), scale="tai") for t in value)
    return {**record, "timespan": Timespan(begin, end)}
