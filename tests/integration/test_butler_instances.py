"""Several register-function instances (processes) on one PostgreSQL-backed Butler (issue 20):
three processes start together on a repository fresh from ``butler create`` (so they race to set
up the dataset type, run, instrument, detectors and exposure records), each handles a third of a
whole LSSTCam exposure plus a redelivery of a fifth of the others' CCDs, all concurrently. No
conflict, no double, no lost CCD: the Butler lists 205 raws, each registered by exactly one
instance (the others saw a duplicate), each announced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from obsingest.dataid import DataId, dataset_id
from obsingest.registry.butler_repo import repo_of
from obsingest.store.local import LocalDirStore
from producers.uploader import DirectUploader
from tests.integration.fixtures.butler import new_repo, query_datasets, small_raw
from tests.integration.test_butler_registry import EXPOSURE, READOUT, RUN

pytestmark = pytest.mark.integration

INSTANCES = 3

#: one register-function instance: its own registry, service and bus; handles the detectors it is
#: given, 32 at once, once the start time has come; prints one JSON line per outcome
_INSTANCE = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from functions.register.service import RegisterService
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId
from obsingest.registry import open_registry
from obsingest.settings import RegistrySettings
from obsingest.store.local import LocalDirStore
from obsingest.store.notifications import GCS_NOTIFICATION_FINALIZE, ObjectEvent

url, store_root, start, exposure = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
detectors = [int(d) for d in sys.argv[5].split(",")]
store = LocalDirStore(Path(store_root))
registry = open_registry(RegistrySettings(url=url))
bus = InMemoryBus()
service = RegisterService(store, registry, bus)
events = []
for det in detectors:
    obj = store.stat(DataId("LSSTCam", exposure, det).object_name())
    events.append(ObjectEvent(f"test:{det}", GCS_NOTIFICATION_FINALIZE, obj))
time.sleep(max(0.0, start - time.time()))

def handle(event):
    for attempt in range(20):  # as the push subscription would redeliver a retriable failure
        try:
            o = service.handle(event)
            return {"detector": o.data_id.detector, "status": o.status, "reason": o.reason,
                    "dataset_id": str(o.arrival.dataset_id) if o.arrival else None,
                    "attempts": attempt + 1}
        except Exception as exc:
            if not getattr(exc, "retriable", False):
                raise
            time.sleep(0.5)
    raise RuntimeError("still failing after 20 deliveries")

with ThreadPoolExecutor(32) as pool:
    for line in pool.map(handle, events):
        print(json.dumps(line), flush=True)
announced = [m.attributes["dataset_id"] for m in bus.topics["ccd-arrivals"]]
print(json.dumps({"announced": announced}), flush=True)
registry.close()
"""


def test_three_instances_on_one_postgresql_butler(tmp_path, postgres_server, monkeypatch):
    url, databases, companion = new_repo("postgresql", tmp_path / "repo", postgres_server)
    try:
        monkeypatch.setenv("OBSINGEST_BUTLER_COMPANION_URL", companion)
        store = LocalDirStore(tmp_path / "store")
        for det in range(205):
            did = DataId("LSSTCam", EXPOSURE, det)
            DirectUploader(store).send(did, small_raw(EXPOSURE, det), READOUT)
        root = Path(__file__).resolve().parents[2]
        start = time.time() + 20  # every instance has opened its registry by then
        procs = []
        for i in range(INSTANCES):
            mine = [d for d in range(205) if d % INSTANCES == i]
            again = [d for d in range(205) if d % INSTANCES != i and d % 5 == 0]
            detectors = ",".join(str(d) for d in mine + again)
            args = [url, str(tmp_path / "store"), str(start), str(EXPOSURE), detectors]
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _INSTANCE, *args],
                    cwd=root,
                    env={**os.environ, "PYTHONPATH": str(root)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outputs = [p.communicate(timeout=600) for p in procs]
        for p, (_, err) in zip(procs, outputs, strict=True):
            assert p.returncode == 0, err[-4000:]
        outcomes, announced = [], Counter()
        for out, _ in outputs:
            for line in out.splitlines():
                row = json.loads(line)
                if "announced" in row:
                    announced.update(row["announced"])
                else:
                    outcomes.append(row)
        ids = {str(dataset_id(DataId("LSSTCam", EXPOSURE, d), "raw", RUN)) for d in range(205)}
        assert {o["status"] for o in outcomes} == {"registered", "duplicate"}, outcomes
        registered = Counter(o["dataset_id"] for o in outcomes if o["status"] == "registered")
        assert set(registered) == ids and set(registered.values()) == {1}  # once each
        assert set(announced) == ids  # every CCD announced (a duplicate announces again)
        # the Butler itself: 205 raws, no more, obsingest's ids
        rows = query_datasets(repo_of(url), RUN)
        assert len(rows) == 205 and {r["id"] for r in rows} == ids
    finally:
        for db in databases:
            postgres_server.drop_database(db)
