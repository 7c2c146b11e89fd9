"""The presence API on PostgreSQL (the local stack's, a fresh database per test): the same
night written to PostgreSQL and to SQLite gets the same answers from ``obsingest serve`` on
either; the reader cannot write; manifests are recorded once on PostgreSQL too."""

import contextlib
import math
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, insert, text
from sqlalchemy.exc import DBAPIError

from benchmarks.presence import Server, free_port
from benchmarks.presence_night import write_night
from obsingest.registry import Registry, tables
from obsingest.registry.engine import psycopg_url
from obsingest.registry.manifests import ManifestConflict, record_manifest
from obsingest.registry.presence import PresenceReader
from obsingest.settings import RegistrySettings
from tests.unit.obsingest.registry.conftest import E1, manifest, newest_and_its_sql, register

pytestmark = pytest.mark.integration

DAY_OBS = 20261123
NIGHT: dict[str, Any]
NIGHT = {"day_obs": DAY_OBS, "exposures": 24, "incomplete_every": 6, "no_manifest_every": 5}


def _write(url: str):
    registry = Registry.open(RegistrySettings(url=url))
    try:
        return write_night(registry, **NIGHT)
    finally:
        registry.close()


def _same(a, b, where=""):
    """Equal JSON, floats to a microsecond (each database does its own time arithmetic)."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, abs_tol=2e-6), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_postgresql_and_sqlite_give_the_same_answers(postgres, tmp_path):
    night = _write(postgres)
    sqlite_url = f"sqlite:///{tmp_path / 'registry.sqlite3'}"
    assert _write(sqlite_url).dataset_ids == night.dataset_ids
    paths = [f"/v1/exposures/LSSTCam/{e}" for e in night.exposures]
    paths += [f"/v1/ccds/LSSTCam/{e}/{d}" for e in night.exposures[::5] for d in (0, 100, 204)]
    paths += [f"/v1/datasets/{i}" for i in night.dataset_ids[::997]]
    paths += [f"/v1/nights/LSSTCam/{DAY_OBS}?limit=7", f"/v1/nights/LSSTCam/{DAY_OBS}?limit=500"]
    answers = {}
    for name, url in (("postgresql", postgres), ("sqlite", sqlite_url)):
        server = Server(url, free_port(), tmp_path / f"{name}.log")
        try:
            server.wait_ready()
            answers[name] = {p: server.get(p) for p in paths}
        finally:
            server.stop()
    for path in paths:
        _same(answers["postgresql"][path], answers["sqlite"][path], path)
    pg = answers["postgresql"]
    # what was written is what is answered
    for exposure in night.exposures:
        body = pg[f"/v1/exposures/LSSTCam/{exposure}"]
        registered = night.registered[exposure]
        assert body["registered"] == len(registered) and len(body["missing"]) == 205 - len(registered)
        source = "instrument" if exposure in night.without_manifest else "manifest"
        assert body["expected_source"] == source
    listed = pg[f"/v1/nights/LSSTCam/{DAY_OBS}?limit=500"]
    assert [e["exposure"] for e in listed["exposures"]] == night.exposures
    assert listed["next_after"] is None


def test_the_reader_on_postgresql_cannot_write(postgres):
    _write(postgres)
    reader = PresenceReader.open(RegistrySettings(url=postgres), budget_seconds=5.0)
    try:
        with pytest.raises(DBAPIError, match="read-only transaction"), reader.engine.begin() as conn:
            conn.execute(text("DELETE FROM exposure_manifest"))
        assert reader.night("LSSTCam", DAY_OBS, limit=500).exposures
    finally:
        reader.close()


def test_manifests_and_new_registrations_on_postgresql(postgres):
    registry = Registry.open(RegistrySettings(url=postgres))
    reader = PresenceReader.open(RegistrySettings(url=postgres), budget_seconds=5.0)
    try:
        assert record_manifest(registry, manifest(E1, [0, 1, 2])).status == "recorded"
        assert record_manifest(registry, manifest(E1, [2, 1, 0])).status == "duplicate"
        with pytest.raises(ManifestConflict):
            record_manifest(registry, manifest(E1, [0, 1]))
        e = reader.exposure("LSSTComCam", E1)
        assert (e.expected, e.registered, e.missing, e.status) == (3, 0, (0, 1, 2), "incomplete")
        for det in (0, 1, 2):
            register(registry, E1, det, 1.5)
        e = reader.exposure("LSSTComCam", E1)
        assert (e.registered, e.missing, e.status) == (3, (), "complete")
        assert 1.5 <= e.latency_max < 5.0
    finally:
        reader.close()
        registry.close()


def _restart_sessions(url: str) -> None:
    """What a PostgreSQL restart does to a client's pool: every session of the database ends."""
    engine = create_engine(psycopg_url(url), isolation_level="AUTOCOMMIT")
    others = "datname = current_database() AND pid <> pg_backend_pid()"
    try:
        with engine.connect() as conn:
            conn.execute(text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {others}"))
            while conn.execute(text(f"SELECT count(*) FROM pg_stat_activity WHERE {others}")).scalar():
                time.sleep(0.05)
    finally:
        engine.dispose()


def test_a_restarted_server_costs_no_request_an_error(postgres):
    """Each pooled connection a restart left stale was one 503 (a burst the size of the pool)
    and the first /healthz said the registry was down: a stale one is now replaced and the
    request answered."""
    registry = Registry.open(RegistrySettings(url=postgres))
    register(registry, E1, 0, 1.5)
    registry.close()
    pool = 4
    reader = PresenceReader.open(RegistrySettings(url=postgres, pool_size=pool), budget_seconds=5.0)
    try:
        for ask in (lambda: reader.exposure("LSSTComCam", E1), reader.ping):
            with contextlib.ExitStack() as held:  # every pooled connection used once
                for conn in [held.enter_context(reader.engine.connect()) for _ in range(pool)]:
                    conn.execute(text("SELECT 1"))
            _restart_sessions(postgres)
            for _ in range(pool):
                ask()
        assert reader.exposure("LSSTComCam", E1).registered == 1
    finally:
        reader.close()


def _scans(node: dict[str, Any]):
    yield node
    for child in node.get("Plans", []):
        yield from _scans(child)


def test_the_status_views_newest_exposures_read_what_they_show_not_all_history(postgres):
    """``obsingest status`` asks for the newest exposures at every refresh: PostgreSQL read every
    exposure and manifest ever recorded (seconds after weeks of nights, at every refresh). Now
    no table is read further than the exposures shown, however long the history."""
    history, shown_n = 2000, 5
    registry = Registry.open(RegistrySettings(url=postgres))
    try:
        recorded = datetime(2026, 11, 22, 3, tzinfo=UTC)
        ids = [E1 + n for n in range(history)]
        with registry.engine.begin() as conn:
            exposures = [{"instrument": "LSSTComCam", "id": e, "day_obs": 20261122} for e in ids]
            conn.execute(insert(tables.exposure), exposures)
            row = {"instrument": "LSSTComCam", "day_obs": 20261122, "detectors": "0", "expected": 1}
            row |= {"recorded_time": recorded, "digest": "d"}
            conn.execute(insert(tables.exposure_manifest), [{**row, "exposure": e} for e in ids])
            conn.execute(text("ANALYZE exposure"))
            conn.execute(text("ANALYZE exposure_manifest"))
    finally:
        registry.close()
    reader = PresenceReader.open(RegistrySettings(url=postgres), budget_seconds=5.0)
    try:
        newest, (sql, params) = newest_and_its_sql(reader, shown_n)
        assert [e.exposure for e in newest] == ids[::-1][:shown_n]
        with reader.engine.connect() as conn:
            [[plan]] = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).all()
    finally:
        reader.close()
    read = [
        (node["Node Type"], node["Relation Name"], node["Actual Rows"] * node["Actual Loops"])
        for node in _scans(plan[0]["Plan"])
        if node.get("Relation Name") in ("exposure", "exposure_manifest")
    ]
    assert read and all(rows <= shown_n for _, _, rows in read), read
