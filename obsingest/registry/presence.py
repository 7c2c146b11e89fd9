"""Presence reads: is a CCD registered, how complete and how late is an exposure, what did a night
bring (the presence API and ``obsingest status``). Every query is a primary-key or index-prefix
lookup. Exposure answers are cached (LRU), versioned by the count of the exposure's datasets and
its manifest's digest: datasets are only inserted and a manifest recorded once, so an unchanged
version means an unchanged answer.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any, Literal, TypeVar

from sqlalchemy import ColumnElement, Connection, and_, bindparam, func, literal_column, select, union
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from obsingest import camera
from obsingest.dataid import (
    CONTROLLERS,
    EXPOSURE_SEQ_FACTOR,
    exposure_day_obs,
    make_exposure_id,
    validate_day_obs,
)
from obsingest.errors import BadObjectName, PermanentError
from obsingest.registry import tables
from obsingest.registry.butler_repo import is_butler_url, repo_of
from obsingest.registry.completeness import (
    FROM_INSTRUMENT,
    FROM_MANIFEST,
    CcdPresence,
    ExposurePresence,
    NightPage,
    from_times,
    manifest_detectors,
    summarize,
)
from obsingest.registry.engine import make_readonly_engine, require_tables
from obsingest.registry.outbox import as_uuid
from obsingest.registry.prepared import Prepared, db_datetime, uuid_param
from obsingest.settings import RegistrySettings, run_name
from obsingest.timescales import as_utc

_INT64_MAX = 2**63 - 1
#: tables a presence reader needs (``exposure_manifest`` since schema migration 4)
T = TypeVar("T")

TABLES = ("dataset", "datastore_record", "exposure", "exposure_manifest", "quarantine")


class QueryRefused(PermanentError):
    """A question the registry cannot answer as asked: ``status`` its HTTP status (400 bad input,
    404 nothing by that name), ``reason`` a short slug."""

    def __init__(self, reason: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


def shown(value: object, limit: int = 60) -> str:
    """An untrusted input as it can be quoted in an error: ASCII-escaped, clipped."""
    text = ascii(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def shown_url(url: str) -> str:
    """A registry URL fit to print: password hidden (``butler:`` URLs have none)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def check_instrument(name: str) -> camera.Instrument:
    try:
        return camera.INSTRUMENTS[name]
    except KeyError:
        raise QueryRefused(
            "unknown-instrument",
            f"unknown instrument {shown(name)} (known: {', '.join(camera.INSTRUMENTS)})",
            404,
        ) from None


def check_exposure(exposure: int) -> int:
    """The exposure's day_obs; QueryRefused unless it is a positive id of a real day."""
    if not 0 < exposure <= _INT64_MAX:
        raise QueryRefused(
            "bad-exposure-id", f"exposure id {shown(exposure)} is not a positive 64-bit integer"
        )
    day_obs = exposure_day_obs(exposure)
    check_day_obs(day_obs, f"exposure id {exposure}", "bad-exposure-id")
    return day_obs


@cache
def _detector_ids(instrument: str) -> frozenset[int]:
    return frozenset(camera.INSTRUMENTS[instrument].detector_ids)


def check_detector(instrument: camera.Instrument, detector: int) -> None:
    if detector not in _detector_ids(instrument.name):
        ids = instrument.detector_ids
        raise QueryRefused(
            "unknown-detector",
            f"{instrument.name} has no detector {shown(detector)} (ids {min(ids)}..{max(ids)})",
            404,
        )


def check_day_obs(day_obs: int, what: str = "night", reason: str = "bad-day-obs") -> None:
    try:
        validate_day_obs(day_obs, what)
    except BadObjectName as exc:  # well-formed, but no night has it
        raise QueryRefused(reason, str(exc), 404) from None


class PresenceReader:
    """Presence queries on a read-only engine of ``settings.url`` (SQLite, PostgreSQL or
    ``butler:``: the companion tables, each CCD answer confirmed by the Butler, the registry of record)."""

    def __init__(self, settings: RegistrySettings, budget_seconds: float, cache_size: int = 20_000) -> None:
        self.engine = engine = make_readonly_engine(settings)
        try:
            require_tables(engine, TABLES)
        except Exception:
            engine.dispose()
            raise
        self.dataset_type = settings.dataset_type
        self.run_template = settings.run
        self.budget_seconds = budget_seconds
        self._cache: OrderedDict[tuple[str, int], tuple[tuple[Any, ...], ExposurePresence]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        #: the registry URL, password hidden
        self.source = shown_url(settings.url)
        self.confirm: Any = None
        if is_butler_url(settings.url):
            from obsingest.registry.butler_reads import ButlerConfirmation

            self.confirm = ButlerConfirmation(repo_of(settings.url))
        self._build_statements()
        # what every request runs, on the driver's cursor (``prepared``)
        self._p_ccd = Prepared(engine, self._q_ccd)
        self._p_dataset = Prepared(engine, self._q_dataset)
        self._p_state = Prepared(engine, self._q_state)

    @classmethod
    def open(
        cls, settings: RegistrySettings, budget_seconds: float, cache_size: int = 20_000
    ) -> PresenceReader:
        return cls(settings, budget_seconds, cache_size)

    def close(self) -> None:
        self.engine.dispose()
        if self.confirm is not None:
            self.confirm.close()

    def ping(self) -> None:
        self._connected(lambda conn: conn.execute(select(literal_column("1"))).scalar())

    def _connected(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` on a pooled connection; once more if that one was closed by the server (a
        restart): SQLAlchemy then replaces every connection pooled before, so no request (no
        /healthz) fails for a stale pool."""
        try:
            with self.engine.connect() as conn:
                return fn(conn)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        with self.engine.connect() as conn:
            return fn(conn)

    def _build_statements(self) -> None:
        d, r, e, m = (tables.dataset, tables.datastore_record, tables.exposure, tables.exposure_manifest)
        ccd_cols: tuple[ColumnElement[Any], ...]
        ccd_cols = (d.c.id, d.c.dataset_type, d.c.run, d.c.instrument, d.c.exposure, d.c.detector)
        ccd_cols += (d.c.ingest_time, r.c.uri, r.c.size, r.c.checksum, r.c.transport)
        joined = d.join(r, r.c.dataset_id == d.c.id)
        ours: tuple[ColumnElement[bool], ...]
        ours = (d.c.dataset_type == bindparam("dt"), d.c.run == bindparam("run"))
        ours += (d.c.instrument == bindparam("inst"), d.c.exposure == bindparam("exp"))
        ccd = select(*ccd_cols, r.c.readout_time).select_from(joined)
        self._q_ccd = ccd.where(*ours, d.c.detector == bindparam("det"))
        self._q_dataset = ccd.where(d.c.id == bindparam("id"))
        self._q_rows = (
            select(d.c.detector, d.c.ingest_time, r.c.readout_time).select_from(joined).where(*ours)
        )
        self._q_manifest = select(m).where(
            m.c.instrument == bindparam("inst"), m.c.exposure == bindparam("exp")
        )
        self._q_exposure = select(e.c.physical_filter, e.c.obs_start, e.c.exposure_time).where(
            e.c.instrument == bindparam("inst"), e.c.id == bindparam("exp")
        )
        # The exposures of an id window (with an exposure record or a manifest), each with its
        # answer's version: the manifest's digest and the number of datasets with its id (any
        # run or instrument, ix_dataset_exposure: any registration changes it, all it must do).
        ids = union(
            *(
                select(col.label("exposure")).where(
                    col.table.c.instrument == bindparam("inst"),
                    bindparam("lo") <= col,
                    col <= bindparam("hi"),
                )
                for col in (e.c.id, m.c.exposure)
            )
        ).subquery("ids")
        # the page first, then the versions of its exposures only
        page = select(ids.c.exposure).order_by(ids.c.exposure).limit(bindparam("n")).subquery("page")
        kept = m.alias("kept")
        datasets = (
            select(func.count()).select_from(d).where(d.c.exposure == page.c.exposure)
        ).scalar_subquery()
        self._q_state = (
            select(page.c.exposure, kept.c.digest, datasets.label("datasets"))
            .select_from(
                page.outerjoin(
                    kept, and_(kept.c.instrument == bindparam("inst"), kept.c.exposure == page.c.exposure)
                )
            )
            .order_by(page.c.exposure)
        )
        # the newest n of each instrument and table, by its key (a backward index scan of n
        # rows): what status reads each refresh is bounded by what it shows, not by history
        newest = [
            select(col.table.c.instrument, col.label("exposure"))
            .where(col.table.c.instrument == name)
            .order_by(col.desc())
            .limit(bindparam("n"))
            .subquery()
            for name in camera.INSTRUMENTS
            for col in (e.c.id, m.c.exposure)
        ]
        latest = union(*(select(arm.c.instrument, arm.c.exposure) for arm in newest)).subquery()
        self._q_latest = (
            select(latest.c.instrument, latest.c.exposure)
            .order_by(latest.c.exposure.desc())
            .limit(bindparam("n"))
        )

    def _ours(self, instrument: str) -> dict[str, Any]:
        return {"dt": self.dataset_type, "run": run_name(self.run_template, instrument), "inst": instrument}

    def ccd(self, instrument: str, exposure: int, detector: int) -> CcdPresence:
        """Whether this CCD is registered (in the configured dataset type and run)."""
        inst = check_instrument(instrument)
        day_obs = check_exposure(exposure)
        check_detector(inst, detector)
        rows = self._p_ccd.rows({**self._ours(instrument), "exp": exposure, "det": detector})
        row = rows[0] if rows else None
        if row is None:
            return CcdPresence(instrument, exposure, detector, day_obs, registered=False)
        return self._confirmed(self._ccd_of(row))

    def dataset(self, dataset_id: uuid.UUID) -> CcdPresence | None:
        """The CCD registered under ``dataset_id`` (any run), None when there is none."""
        rows = self._p_dataset.rows({"id": uuid_param(self.engine, dataset_id)})
        found = self._confirmed(self._ccd_of(rows[0])) if rows else None
        return found if found is not None and found.registered else None

    def _confirmed(self, ccd: CcdPresence) -> CcdPresence:
        return self.confirm(ccd) if self.confirm is not None else ccd

    def _ccd_of(self, row: tuple[Any, ...]) -> CcdPresence:
        """A row of ``_q_ccd`` / ``_q_dataset`` as the driver gives it."""
        ds_id, dtype, run, instrument, exposure, detector, ingest_time, uri, size, checksum = row[:10]
        registered, readout = db_datetime(ingest_time), db_datetime(row[11])
        latency = (registered - readout).total_seconds() if registered and readout else None
        return CcdPresence(
            instrument=instrument,
            exposure=exposure,
            detector=detector,
            day_obs=exposure_day_obs(exposure),
            registered=True,
            dataset_id=str(as_uuid(ds_id)),
            dataset_type=dtype,
            run=run,
            uri=uri,
            size=size,
            checksum=checksum,
            transport=row[10],
            readout_time=readout,
            registered_time=registered,
            latency_seconds=latency,
            over_budget=None if latency is None else latency > self.budget_seconds,
        )

    def exposure(self, instrument: str, exposure: int) -> ExposurePresence | None:
        """Expected, registered, missing, latencies and status; None when the registry knows
        nothing of the exposure (no manifest, no exposure record)."""
        check_instrument(instrument)
        check_exposure(exposure)
        found = self._answers(instrument, exposure, exposure, 1)
        return found[0] if found else None

    def night(self, instrument: str, day_obs: int, limit: int = 100, after: int | None = None) -> NightPage:
        """The night's exposures (manifest or datasets) in id order, ``limit`` per page."""
        check_instrument(instrument)
        check_day_obs(day_obs)
        found: list[ExposurePresence] = []
        # one id range per controller offset of that day, in id order
        for start in sorted({make_exposure_id(day_obs, 0, c) for c in CONTROLLERS}):
            lo, hi = start, start + EXPOSURE_SEQ_FACTOR - 1
            if after is not None:
                lo = max(lo, after + 1)
            if lo > hi or len(found) > limit:  # past this range's last exposure, or page full
                continue
            found += self._answers(instrument, lo, hi, limit + 1 - len(found))
        more = len(found) > limit
        found = found[:limit]
        return NightPage(instrument, day_obs, found, found[-1].exposure if more else None)

    def latest(self, limit: int = 10) -> list[ExposurePresence]:
        """The ``limit`` newest exposures (highest ids) of any instrument, newest first."""
        rows = self._connected(lambda conn: conn.execute(self._q_latest, {"n": limit}).all())
        by_instrument: dict[str, list[int]] = {}
        for row in rows:
            by_instrument.setdefault(row.instrument, []).append(row.exposure)
        out = []
        for inst, ids in by_instrument.items():
            wanted = set(ids)
            answers = self._answers(inst, min(ids), max(ids), len(ids))
            out += [a for a in answers if a.exposure in wanted]
        return sorted(out, key=lambda s: s.exposure, reverse=True)

    def _answers(self, instrument: str, lo: int, hi: int, n: int) -> list[ExposurePresence]:
        """Answers for the first ``n`` exposures with ids in [lo, hi], ascending (cached by version)."""
        ours = self._ours(instrument)
        states = self._p_state.rows({"inst": instrument, "lo": lo, "hi": hi, "n": n})
        out: list[ExposurePresence | None] = []
        stale = []
        for exposure, digest, datasets in states:
            version = (datasets, digest)
            out.append(self._cached((instrument, exposure), version))
            if out[-1] is None:
                stale.append((len(out) - 1, exposure, version))

        def summarise(conn: Connection) -> None:  # an exposure still arriving, or not asked before
            for index, exposure, version in stale:
                answer = self._summary(conn, ours, instrument, exposure)
                self._store((instrument, exposure), version, answer)
                out[index] = answer

        if stale:
            self._connected(summarise)
        return [a for a in out if a is not None]

    def _summary(self, conn: Any, ours: dict[str, Any], instrument: str, exposure: int) -> ExposurePresence:
        key = {"inst": instrument, "exp": exposure}
        manifest = conn.execute(self._q_manifest, key).first()
        rows = conn.execute(self._q_rows, {**ours, "exp": exposure}).all()
        source: Literal["manifest", "instrument"]
        if manifest is not None:
            expected = manifest_detectors(manifest.detectors)
            source = FROM_MANIFEST
            about = (manifest.physical_filter, manifest.obs_start, manifest.exposure_time)
        else:
            expected = sorted(_detector_ids(instrument))
            source = FROM_INSTRUMENT
            about = conn.execute(self._q_exposure, key).first() or (None, None, None)
        flt, start, exptime = about
        return summarize(
            instrument,
            exposure,
            exposure_day_obs(exposure),
            expected,
            source,
            budget_seconds=self.budget_seconds,
            physical_filter=flt,
            obs_start=as_utc(start),
            exposure_time=exptime,
            **from_times(rows),
        )

    def _cached(self, key: tuple[str, int], version: tuple[Any, ...]) -> ExposurePresence | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is None or hit[0] != version:
                return None
            self._cache.move_to_end(key)
            return hit[1]

    def _store(self, key: tuple[str, int], version: tuple[Any, ...], value: ExposurePresence) -> None:
        with self._lock:
            self._cache[key] = (version, value)
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def quarantine(self, since: datetime | None = None, recent: int = 5) -> dict[str, Any]:
        """Quarantined inputs (seen since ``since``): counts by reason and the latest few."""
        q = tables.quarantine
        where = [q.c.last_seen >= since] if since is not None else []
        with self.engine.connect() as conn:
            counts = select(q.c.reason, func.count()).where(*where).group_by(q.c.reason)
            by_reason = {reason: n for reason, n in conn.execute(counts)}
            latest = conn.execute(
                select(q.c.object_uri, q.c.reason, q.c.message, q.c.last_seen, q.c.occurrences)
                .where(*where)
                .order_by(q.c.last_seen.desc())
                .limit(recent)
            ).all()
        return {
            "total": sum(by_reason.values()),
            "by_reason": dict(sorted(by_reason.items())),
            "recent": [{**row._asdict(), "last_seen": as_utc(row.last_seen)} for row in latest],
        }
