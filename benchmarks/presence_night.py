"""A night of LSSTCam in a registry, written fast (bulk INSERTs in large transactions, not a
transaction per CCD): what the presence benchmark and the presence API's tests query. Values are
what the pipeline writes, with a latency tail over the 5 s budget, a few exposures incomplete
and a few without manifest.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, insert

from obsingest import camera
from obsingest.dataid import dataset_id, make_exposure_id
from obsingest.messages import ExposureManifest
from obsingest.registry import Registry, tables
from obsingest.registry.manifests import manifest_digest
from obsingest.settings import run_name

#: one exposure every ~17 s through a night
CADENCE_SECONDS = 17.0


class _Id(NamedTuple):
    """What ``dataset_id`` reads of a data id, without DataId's validation (valid by construction)."""

    instrument: str
    exposure: int
    detector: int


@dataclass
class Night:
    """What was written, for drivers and checks."""

    instrument: str
    day_obs: int
    exposures: list[int] = field(default_factory=list)
    #: exposure -> detectors written (registered)
    registered: dict[int, list[int]] = field(default_factory=dict)
    #: exposures written without a manifest
    without_manifest: set[int] = field(default_factory=set)
    dataset_ids: list[uuid.UUID] = field(default_factory=list)

    @property
    def datasets(self) -> int:
        return sum(len(v) for v in self.registered.values())


def write_night(
    registry: Registry,
    *,
    instrument: str = "LSSTCam",
    day_obs: int = 20261123,
    exposures: int = 1000,
    seed: int = 15,
    incomplete_every: int = 50,
    no_manifest_every: int = 100,
    batch: int = 20_000,
) -> Night:
    """Write ``exposures`` exposures of every detector of ``instrument`` into ``registry``."""
    rng = random.Random(seed)
    inst = camera.instrument(instrument)
    detectors = list(inst.detector_ids)
    run = run_name(registry.settings.run, instrument)
    dtype = registry.settings.dataset_type
    night = Night(instrument, day_obs)
    start = datetime(day_obs // 10000, day_obs // 100 % 100, day_obs % 100, 23, tzinfo=UTC)
    exposure_rows, manifest_rows, dataset_rows, datastore_rows = [], [], [], []
    for seq in range(1, exposures + 1):
        exposure = make_exposure_id(day_obs, seq)
        obs_start = start + timedelta(seconds=seq * CADENCE_SECONDS)
        readout = obs_start + timedelta(seconds=17.0)
        compressed = readout + timedelta(seconds=0.35)
        flt = inst.filters["ugrizy"[seq % 6]]
        night.exposures.append(exposure)
        exposure_rows.append(
            {
                "instrument": instrument,
                "id": exposure,
                "day_obs": day_obs,
                "obs_start": obs_start,
                "exposure_time": 15.0,
                "physical_filter": flt,
                "seq_num": seq,
            }
        )
        if seq % no_manifest_every:
            manifest = ExposureManifest(
                instrument, exposure, day_obs, detectors, obs_start, 15.0, flt, obs_start
            )
            manifest_rows.append(
                {
                    "instrument": instrument,
                    "exposure": exposure,
                    "day_obs": day_obs,
                    "detectors": ",".join(map(str, detectors)),
                    "expected": len(detectors),
                    "obs_start": obs_start,
                    "exposure_time": 15.0,
                    "physical_filter": flt,
                    "published": obs_start,
                    "recorded_time": obs_start,
                    "digest": manifest_digest(manifest),
                }
            )
        else:
            night.without_manifest.add(exposure)
        written = list(detectors)
        if seq % incomplete_every == 0:
            for det in rng.sample(written, 3):
                written.remove(det)
        night.registered[exposure] = written
        for det in written:
            ds_id = dataset_id(_Id(instrument, exposure, det), dtype, run)  # type: ignore[arg-type]
            # median ~2.5 s, 1 CCD in ~5,000 over 5 s; every 40th exposure had a slow link
            latency = rng.lognormvariate(0.9, 0.2) + (2.5 if seq % 40 == 0 else 0.0)
            registered = readout + timedelta(seconds=latency)
            dataset_rows.append(
                {
                    "id": ds_id,
                    "dataset_type": dtype,
                    "run": run,
                    "instrument": instrument,
                    "exposure": exposure,
                    "detector": det,
                    "ingest_time": registered,
                }
            )
            datastore_rows.append(
                {
                    "dataset_id": ds_id,
                    "uri": f"gs://bucket/raw/{instrument}/{day_obs}/{exposure}/"
                    f"{instrument}_{exposure}_{det:03d}.fits.fz",
                    "size": 15_137_280,
                    "checksum": f"crc32c:{rng.getrandbits(32):08x}",
                    "md5": "",
                    "readout_time": readout,
                    "compressed_time": compressed,
                    "stored_time": registered,  # (not what presence reads: one value fewer)
                    "transport": "direct",
                }
            )
            night.dataset_ids.append(ds_id)
    with registry.engine.begin() as conn:
        conn.execute(registry._insert(tables.run).on_conflict_do_nothing(), [{"name": run}])
        conn.execute(insert(tables.exposure), exposure_rows)
        if manifest_rows:
            conn.execute(insert(tables.exposure_manifest), manifest_rows)
    for lo in range(0, len(dataset_rows), batch):
        with registry.engine.begin() as conn:
            _bulk(conn, tables.dataset, dataset_rows[lo : lo + batch])
            _bulk(conn, tables.datastore_record, datastore_rows[lo : lo + batch])
    return night


def _bulk(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """INSERT many rows through the driver: COPY on PostgreSQL, executemany on SQLite, with
    values as SQLAlchemy would store them (SQLite: UUID as 32 hex digits, datetimes as text)."""
    names = list(rows[0])
    raw = conn.connection.driver_connection
    assert raw is not None  # an open connection has its driver's
    if conn.dialect.name == "postgresql":
        with raw.cursor() as cur, cur.copy(f"COPY {table.name} ({', '.join(names)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([row[n] for n in names])
        return
    # random UUID keys land all over the indexes: a page cache that holds them saves the I/O
    raw.execute("PRAGMA cache_size=-262144")  # 256 MiB
    marks = ", ".join("?" for _ in names)
    texts: dict[datetime, str] = {}  # an exposure's readout time is every one of its CCDs'

    def value(v: Any) -> Any:
        if isinstance(v, uuid.UUID):
            return v.hex
        if isinstance(v, datetime):
            text = texts.get(v)
            if text is None:
                text = texts[v] = v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            return text
        return v

    raw.executemany(  # type: ignore[union-attr]
        f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({marks})",
        [tuple(value(row[n]) for n in names) for row in rows],
    )
