"""``obsingest reconcile`` (one pass) on the embedded defaults: the settings the function uses,
a report, and the exit code as the health."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from obsingest.dataid import DataId
from obsingest.registry import Registry
from obsingest.settings import BusSettings, RegistrySettings, StoreSettings
from obsingest.store.local import LocalDirStore
from obsingest_cli.main import main
from obsingest_cli.script.facility import local_stack_repair
from producers.uploader import DirectUploader
from tests.unit.functions.conftest import small_ccd

pytestmark = pytest.mark.unit

READOUT = datetime(2026, 11, 22, 3, 0, 30, tzinfo=UTC)


@pytest.fixture
def embedded(tmp_path, monkeypatch):
    monkeypatch.setenv("OBSINGEST_STORE_URL", f"file://{tmp_path / 'store'}")
    monkeypatch.setenv("OBSINGEST_REGISTRY_URL", f"sqlite:///{tmp_path / 'r.sqlite3'}")
    monkeypatch.setenv("OBSINGEST_BUS_BACKEND", "memory")
    from functions.register import wiring

    wiring.configure(None)
    yield tmp_path
    wiring.configure(None)


def test_one_pass_registers_what_was_missed_and_exits_0(embedded, capsys):
    store = LocalDirStore(embedded / "store")
    did = DataId("LSSTComCam", 2026112200001, 2)
    DirectUploader(store).send(did, small_ccd(did.exposure, did.detector), READOUT)
    for path, _ in store.outbox().pending():  # the notification is lost
        store.outbox().ack(path)
    assert main(["reconcile", "--dry-run", "--grace", "0", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["reconcile"]["missing"] == 1
    assert main(["reconcile", "--grace", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["reconcile"]["outcomes"] == {"registered": 1}
    assert report["stats"]["registered_by_reconcile"] == 1 and report["drained"] == 0
    assert main(["reconcile", "--dry-run", "--grace", "0", "--json"]) == 0


def test_exit_code_2_when_the_services_canaries_stopped_coming_back(embedded, capsys):
    registry = Registry.open(RegistrySettings(url=f"sqlite:///{embedded / 'r.sqlite3'}"))
    registry.audit.canary_written("canary/lost", datetime.now(UTC) - timedelta(minutes=5))
    registry.close()
    assert main(["reconcile", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["notifications_healthy"] is False


def test_the_repair_is_wired_only_on_the_local_stack(monkeypatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    gs = StoreSettings(url="gs://ccds")
    assert local_stack_repair(gs, BusSettings()) is None
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:18085")
    assert callable(local_stack_repair(gs, BusSettings()))
    assert local_stack_repair(StoreSettings(url="file:///tmp/x"), BusSettings()) is None
