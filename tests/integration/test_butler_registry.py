"""Registering straight into a real daf_butler repository (SQLite and PostgreSQL registries):
the register service with ``OBSINGEST_REGISTRY_URL=butler:<repo>``, checked with the real
``butler`` CLI and the Butler API."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from functions.register.service import RegisterService
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId, dataset_id
from obsingest.registry import open_registry
from obsingest.registry.butler import ButlerRegistry
from obsingest.registry.butler_repo import repo_of
from obsingest.settings import RegistrySettings
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import from_storage_cloudevent
from producers.uploader import DirectUploader
from tests.integration.fixtures.butler import new_repo, query_datasets, small_raw

pytestmark = pytest.mark.integration

EXPOSURE = 2026112200001
RUN = "LSSTCam/raw/all"
READOUT = datetime(2026, 11, 22, 3, 0, 20, tzinfo=UTC)


class Env:
    def __init__(self, url: str, root) -> None:
        self.url = url
        self.store = LocalDirStore(root / "store")
        self.registry = open_registry(RegistrySettings(url=url))
        self.bus = InMemoryBus()
        self.service = RegisterService(self.store, self.registry, self.bus)

    def upload(self, exposure: int, detectors, data: bytes | None = None) -> None:
        for det in detectors:
            did = DataId("LSSTCam", exposure, det)
            DirectUploader(self.store).send(did, data or small_raw(exposure, det), READOUT)

    def deliver(self, threads: int = 64) -> list:
        """Every pending finalize event, ``threads`` at once (as the relay or Cloud Functions
        concurrency would), each event acked after it was handled."""
        outbox = self.store.outbox()
        pending = list(outbox.pending())

        def handle(item):
            path, event = item
            outcome = self.service.handle(from_storage_cloudevent(event, event["data"]))
            outbox.ack(path)
            return outcome

        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(handle, pending))

    def butler(self):
        from lsst.daf.butler import Butler

        return Butler.from_config(repo_of(self.url))


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request, tmp_path, monkeypatch) -> Iterator[Env]:
    yield from butler_env(request, tmp_path, monkeypatch)


def butler_env(request, tmp_path, monkeypatch) -> Iterator[Env]:
    """An Env on a fresh repository from ``butler create`` (``request.param``: its registry)."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgresql" else None
    url, databases, companion = new_repo(request.param, tmp_path / "repo", server)
    if companion:
        monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", companion)
    else:
        monkeypatch.delenv("OBSINGEST_BUTLER_COMPANION_URL", raising=False)
    e = Env(url, tmp_path)
    yield e
    e.registry.close()
    for db in databases:
        assert server is not None  # databases are made on a server
        server.drop_database(db)


def test_a_whole_lsstcam_exposure_lands_in_the_butler_with_obsingest_ids(env):
    assert isinstance(env.registry, ButlerRegistry)
    env.upload(EXPOSURE, range(205))
    outcomes = env.deliver()
    assert [o.status for o in outcomes] == ["registered"] * 205
    ids = {str(dataset_id(DataId("LSSTCam", EXPOSURE, d), "raw", RUN)) for d in range(205)}
    assert {str(o.arrival.dataset_id) for o in outcomes} == ids
    # the real CLI lists every CCD, science, wavefront and guider, with obsingest's dataset ids
    rows = query_datasets(repo_of(env.url), RUN)
    assert {r["id"] for r in rows} == ids
    assert sorted(int(r["detector"]) for r in rows) == list(range(205))
    assert {r["physical_filter"] for r in rows} == {"r_57"}
    assert env.registry.batch_stats()["largest_batch"] > 1  # concurrent CCDs shared transactions

    butler = env.butler()
    try:
        [exposure] = butler.query_dimension_records("exposure", instrument="LSSTCam")
        assert (exposure.obs_id, exposure.seq_num, exposure.day_obs) == ("MC_O_20261122_000001", 1, 20261122)
        # the camera's cards: SHUTTIME is the exposure time, GROUPID and DATE-* are TAI
        assert (exposure.observation_type, exposure.exposure_time, exposure.dark_time) == (
            "science",
            15.001,
            15.9318,
        )
        assert exposure.group == "2026-11-22T03:00:33.570"
        assert exposure.timespan.end.utc.isot.startswith("2026-11-22T03:00:15")
        assert exposure.timespan.end.tai.isot.startswith("2026-11-22T03:00:52")
        assert exposure.tracking_ra is not None and exposure.sky_angle is not None
        detectors = {r.id: r for r in butler.query_dimension_records("detector", instrument="LSSTCam")}
        assert (detectors[191].full_name, detectors[191].purpose) == ("R00_SW0", "WAVEFRONT")
        assert (detectors[189].raft, detectors[189].name_in_raft) == ("R00", "SG0")
        # the file is where the store put it (transfer="direct"), and it reads back
        ref = butler.find_dataset(
            "raw", instrument="LSSTCam", exposure=EXPOSURE, detector=192, collections=RUN
        )
        assert str(butler.getURI(ref)) == env.store.uri(DataId("LSSTCam", EXPOSURE, 192).object_name())
        # read back through the Butler's datastore record: the very bytes of the CCD
        assert butler.getURI(ref).read() == small_raw(EXPOSURE, 192)
        # a repository from `butler create` got the dataset type Rubin's repositories define
        assert butler.get_dataset_type("raw").storageClass_name == "Exposure"
    finally:
        butler.close()


def test_a_redelivery_storm_in_one_batch_ingests_each_ccd_once(env):
    """Every notification delivered three times at once (at-least-once at its worst): copies of
    one CCD land in one batch, and the batch ingests it once rather than failing whole on
    daf_butler's "same DataId as other ingest dataset"."""
    detectors = list(range(12))
    env.upload(EXPOSURE, detectors)
    outbox = env.store.outbox()
    events = [from_storage_cloudevent(e, e["data"]) for _, e in outbox.pending()] * 3
    with ThreadPoolExecutor(len(events)) as pool:
        outcomes = list(pool.map(env.service.handle, events))
    by_ccd: dict[int, list[str]] = {}
    for o in outcomes:
        by_ccd.setdefault(o.data_id.detector, []).append(o.status)
    assert {d: sorted(s) for d, s in by_ccd.items()} == {
        d: ["duplicate", "duplicate", "registered"] for d in detectors
    }
    assert env.registry.batch_stats()["largest_batch"] > len(detectors)  # copies did meet
    rows = query_datasets(repo_of(env.url), RUN)
    assert sorted(int(r["detector"]) for r in rows) == detectors


def test_redelivery_is_a_noop_and_conflicting_bytes_are_quarantined(env):
    detectors = [0, 94, 189, 191]
    env.upload(EXPOSURE, detectors)
    first = env.deliver()
    # every notification delivered again (at-least-once), all at once
    outbox = env.store.outbox()
    for det in detectors:
        obj = env.store.stat(DataId("LSSTCam", EXPOSURE, det).object_name())
        from obsingest.store.notifications import storage_cloudevent

        outbox.inject(storage_cloudevent(obj))
    again = env.deliver()
    assert [o.status for o in again] == ["duplicate"] * 4
    assert {o.arrival.dataset_id for o in again} == {o.arrival.dataset_id for o in first}
    assert len(query_datasets(repo_of(env.url), RUN)) == 4

    # the object replaced by other bytes under the same name: refused, the Butler keeps the first
    did = DataId("LSSTCam", EXPOSURE, 94)
    env.store.delete(did.object_name())
    good = small_raw(EXPOSURE, 94)
    env.upload(EXPOSURE, [94], good[:-2880] + bytes(2880))
    [outcome] = env.deliver()
    assert (outcome.status, outcome.reason) == ("quarantined", "checksum-conflict")
    assert "refusing" in outcome.message
    [row] = env.registry.quarantined()
    assert (row["reason"], row["detector"]) == ("checksum-conflict", 94)
    assert len(query_datasets(repo_of(env.url), RUN)) == 4


def test_a_dataset_the_butler_has_at_another_uri_is_a_conflict(env, tmp_path):
    """Someone ingested the CCD with Butler's own tools first: obsingest refuses, never moves it."""
    from lsst.daf.butler import Butler, DatasetIdGenEnum, DatasetRef, FileDataset

    from obsingest.registry.butler_repo import FALLBACK_FORMATTER

    did = DataId("LSSTCam", EXPOSURE, 5)
    env.upload(EXPOSURE, [4])
    env.deliver()  # dimension records exist now
    elsewhere = tmp_path / "elsewhere.fits.fz"
    elsewhere.write_bytes(small_raw(EXPOSURE, 5))
    butler = Butler.from_config(repo_of(env.url), writeable=True)
    try:
        ref = DatasetRef(
            butler.get_dataset_type("raw"),
            {"instrument": "LSSTCam", "exposure": EXPOSURE, "detector": 5},
            run=RUN,
            id_generation_mode=DatasetIdGenEnum.DATAID_TYPE_RUN,
        )
        butler.ingest(FileDataset(str(elsewhere), [ref], formatter=FALLBACK_FORMATTER), transfer="direct")
    finally:
        butler.close()
    env.upload(EXPOSURE, [5])
    [outcome] = env.deliver()
    assert (outcome.status, outcome.reason) == ("quarantined", "checksum-conflict")
    assert "already has dataset" in outcome.message and str(elsewhere) in outcome.message
    rows = {r["detector"]: r for r in query_datasets(repo_of(env.url), RUN)}
    assert set(rows) == {"4", "5"}
    assert str(did.exposure) in rows["5"]["exposure"]


def test_an_exposure_arriving_at_once_is_one_ingest_and_a_conflict_in_it_only_its_ccd(env, monkeypatch):
    """205 CCDs delivered at once, one of them with other bytes than the dataset registered
    earlier under its name: one Butler transaction for the exposure, the 204 registered, the
    conflicting CCD quarantined with its reason, the Butler keeping the first bytes."""
    env.upload(EXPOSURE, [94])
    assert [o.status for o in env.deliver()] == ["registered"]
    # the bounds generous: the batch stops because it holds every detector, not on a timer
    monkeypatch.setenv("OBSINGEST_BUTLER_GATHER", "60")
    monkeypatch.setenv("OBSINGEST_BUTLER_GATHER_GAP", "60")
    env.registry.close()
    env.registry = open_registry(RegistrySettings(url=env.url))
    env.service = RegisterService(env.store, env.registry, env.bus)
    did = DataId("LSSTCam", EXPOSURE, 94)
    env.store.delete(did.object_name())
    env.upload(EXPOSURE, [d for d in range(205) if d != 94])
    env.upload(EXPOSURE, [94], small_raw(EXPOSURE, 94)[:-2880] + bytes(2880))
    outcomes = {o.data_id.detector: o for o in env.deliver(threads=205)}
    assert len(outcomes) == 205
    assert (outcomes[94].status, outcomes[94].reason) == ("quarantined", "checksum-conflict")
    assert {o.status for d, o in outcomes.items() if d != 94} == {"registered"}
    stats = env.registry.batch_stats()
    assert (stats["batches"], stats["largest_batch"]) == (1, 205)
    rows = query_datasets(repo_of(env.url), RUN)
    assert sorted(int(r["detector"]) for r in rows) == list(range(205))
    [row] = env.registry.quarantined()
    assert (row["reason"], row["detector"]) == ("checksum-conflict", 94)


def test_an_exposure_whose_times_the_butler_cannot_hold_registers_without_a_timespan(env):
    """A header whose exposure began before 1970 (a reset clock): daf_butler refuses such a
    timespan, which failed the set-up of the whole Butler batch, retriably, at every redelivery
    (its batch-mates of other exposures too). Its record now has no timespan; all register."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    reset = datetime(1969, 12, 31, 23, tzinfo=UTC)
    for det in range(3):
        spec = CcdSpec("LSSTCam", EXPOSURE + 1, det, 20261122, reset, 15.0, "r", "small", seed=1)
        env.upload(EXPOSURE + 1, [det], compress_fits(generate_raw_ccd(spec), threads=1))
    env.upload(EXPOSURE, range(3))
    assert [o.status for o in env.deliver()] == ["registered"] * 6
    with env.butler() as butler:
        [record] = butler.registry.queryDimensionRecords(
            "exposure", instrument="LSSTCam", exposure=EXPOSURE + 1
        )
    assert record.timespan is None
