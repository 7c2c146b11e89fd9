"""The Butler is the registry of record (issue 20): on a repository from ``butler create`` (SQLite
and PostgreSQL registries), a failure between the Butler's write and the companion's (the
companion's database failing, the function process killed there) or inside the Butler never leaves
obsingest claiming what the Butler lacks, and ends with each CCD registered in the Butler exactly
once and announced once, repaired by what runs unattended (the notification's redelivery, the
facility's reconcile pass), no manual step."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from functions.register.facility.reconcile import Reconciler
from obsingest import defaults
from obsingest.dataid import DataId, dataset_id
from obsingest.errors import RetriableError
from obsingest.registry.butler import ButlerRegistry
from obsingest.registry.butler_repo import repo_of
from tests.integration.fixtures.butler import query_datasets
from tests.integration.test_butler_registry import EXPOSURE, RUN, Env, butler_env

pytestmark = pytest.mark.integration

DETECTORS = [0, 94, 189, 191]
IDS = {str(dataset_id(DataId("LSSTCam", EXPOSURE, d), "raw", RUN)) for d in DETECTORS}
SINCE = datetime(2000, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request, tmp_path, monkeypatch):
    yield from butler_env(request, tmp_path, monkeypatch)


def _deliver_failing(env: Env) -> list:
    """Every pending event once, one at a time; failed ones stay unacked. Their errors."""
    outbox = env.store.outbox()
    errors = []
    for path, event in list(outbox.pending()):
        from obsingest.store.notifications import from_storage_cloudevent

        try:
            env.service.handle(from_storage_cloudevent(event, event["data"]))
        except RetriableError as exc:
            errors.append(exc)
            continue
        outbox.ack(path)
    return errors


def _announced(env: Env) -> Counter[str]:
    return Counter(m.attributes["dataset_id"] for m in env.bus.topics[defaults.ARRIVALS_TOPIC])


def _butler_ids(env: Env) -> list[str]:
    return sorted(r["id"] for r in query_datasets(repo_of(env.url), RUN))


def _companion_ids(env: Env) -> set[str]:
    return {r["id"] for r in env.registry.datasets() if r["companion"]}


def _claimed(env: Env) -> set[str]:
    """What reconcile counts as registered."""
    uris = {env.store.uri(DataId("LSSTCam", EXPOSURE, d).object_name()) for d in DETECTORS}
    return env.registry.audit.registered_uris(uris)


def test_the_companion_failing_after_the_butler_commit_heals_on_redelivery(env, monkeypatch):
    assert isinstance(env.registry, ButlerRegistry)
    env.upload(EXPOSURE, DETECTORS)

    def companion_down(fn):
        raise OperationalError("COMMIT", None, ConnectionError("companion down (test)"))

    monkeypatch.setattr(env.registry, "_in_tx", companion_down)
    monkeypatch.setattr(env.registry.settings, "retry_attempts", 1)
    errors = _deliver_failing(env)
    assert len(errors) == len(DETECTORS) and all(e.retriable for e in errors)
    # the Butler holds them, the companion does not: nothing announced, reconcile would not
    # count them as registered (and would hand them to the register service)
    assert _butler_ids(env) == sorted(IDS)
    assert _companion_ids(env) == set() and _claimed(env) == set()
    assert not _announced(env)

    monkeypatch.undo()
    assert _deliver_failing(env) == []  # the unacked notifications, redelivered
    assert _butler_ids(env) == sorted(IDS)  # exactly once each
    assert _companion_ids(env) == IDS and len(_claimed(env)) == len(DETECTORS)
    assert _announced(env) == Counter(dict.fromkeys(IDS, 1))
    report = Reconciler(env.service, ("raw/",), grace=0.0).run(SINCE)
    assert (report.listed, report.known, report.missing) == (4, 4, 0)


def test_the_butler_failing_leaves_no_claim_and_reconcile_registers(env, monkeypatch):
    """The original bug: obsingest's rows committed, the Butler's ingest failed, reconcile then
    counted the CCDs as known and never retried them."""
    env.upload(EXPOSURE, DETECTORS)

    def butler_down(*datasets, **kwargs):
        raise ConnectionError("Butler registry database down (test)")

    monkeypatch.setattr(env.registry.butler, "ingest", butler_down)
    errors = _deliver_failing(env)
    assert len(errors) == len(DETECTORS)
    assert env.registry.datasets() == [] and env.registry.count_datasets() == 0
    assert _claimed(env) == set()
    monkeypatch.undo()
    # notifications lost for good (dead-lettered, parked): the facility's pass finds the gap
    report = Reconciler(env.service, ("raw/",), grace=0.0).run(SINCE)
    assert (report.missing, dict(report.outcomes)) == (4, {"registered": 4})
    assert _butler_ids(env) == sorted(IDS) and _companion_ids(env) == IDS
    assert _announced(env) == Counter(dict.fromkeys(IDS, 1))


_KILLED_BETWEEN_THE_WRITES = """
import os, sys
from pathlib import Path
from obsingest.registry.butler import ButlerRegistry
from tests.integration.test_butler_registry import Env

def die(self, held):  # the Butler has committed; the process dies before the companion's write
    os._exit(137)

ButlerRegistry._companion_step = die
env = Env(sys.argv[1], Path(sys.argv[2]))
env.deliver()
"""


def test_the_function_killed_between_the_writes_ends_registered_once(env, tmp_path):
    env.upload(EXPOSURE, DETECTORS)
    root = Path(__file__).resolve().parents[2]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_THE_WRITES, env.url, str(tmp_path)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == 137, killed.stderr[-3000:]
    assert _butler_ids(env) == sorted(IDS)
    assert _companion_ids(env) == set() and _claimed(env) == set()
    # the facility's pass (the killed function's notifications are not redelivered here)
    report = Reconciler(env.service, ("raw/",), grace=0.0).run(SINCE)
    assert (report.missing, dict(report.outcomes)) == (4, {"registered": 4})
    assert _butler_ids(env) == sorted(IDS)
    assert _companion_ids(env) == IDS
    assert _announced(env) == Counter(dict.fromkeys(IDS, 1))
    again = Reconciler(env.service, ("raw/",), grace=0.0).run(SINCE)
    assert (again.known, again.missing) == (4, 0)


def test_a_raw_the_butler_lost_is_not_reported_present_and_reconcile_restores_it(env):
    """The companion records a CCD the Butler no longer holds (pruned behind obsingest's back,
    a Butler database restored from an older backup): presence says not registered, reconcile
    finds the gap and ingests it again, once."""
    from lsst.daf.butler import Butler

    from obsingest.registry.presence import PresenceReader
    from obsingest.settings import RegistrySettings

    env.upload(EXPOSURE, DETECTORS)
    assert {o.status for o in env.deliver()} == {"registered"}
    butler = Butler.from_config(repo_of(env.url), writeable=True)
    try:
        ref = butler.find_dataset(
            "raw", instrument="LSSTCam", exposure=EXPOSURE, detector=94, collections=RUN
        )
        butler.pruneDatasets([ref], disassociate=True, unstore=True, purge=True)
    finally:
        butler.close()
    assert len(_butler_ids(env)) == 3 and len(_claimed(env)) == 3
    reader = PresenceReader.open(RegistrySettings(url=env.url), budget_seconds=5.0)
    try:
        assert not reader.ccd("LSSTCam", EXPOSURE, 94).registered
        assert reader.dataset(ref.id) is None
        assert reader.ccd("LSSTCam", EXPOSURE, 0).registered
        report = Reconciler(env.service, ("raw/",), grace=0.0).run(SINCE)
        assert (report.known, report.missing, dict(report.outcomes)) == (3, 1, {"duplicate": 1})
        assert _butler_ids(env) == sorted(IDS)
        assert reader.ccd("LSSTCam", EXPOSURE, 94).registered
    finally:
        reader.close()
