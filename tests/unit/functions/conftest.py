from datetime import UTC, datetime
from functools import cache

import pytest

from functions.register.service import RegisterService
from obsingest.bus.memory import InMemoryBus
from obsingest.dataid import DataId
from obsingest.registry import Registry
from obsingest.settings import RegistrySettings
from obsingest.store.local import LocalDirStore

DAY_OBS = 20261122


@cache
def small_ccd(exposure: int, detector: int, instrument: str = "LSSTComCam") -> bytes:
    """A real compressed small CCD, made by the DAQ simulator and the edge compressor."""
    from producers.compress import compress_fits
    from producers.daq.simulator import CcdSpec, generate_raw_ccd

    spec = CcdSpec(
        instrument, exposure, detector, DAY_OBS, datetime(2026, 11, 22, 3, 0, tzinfo=UTC), 15.0, "r", "small"
    )
    return compress_fits(generate_raw_ccd(spec), threads=1)


class Env:
    def __init__(self, tmp_path):
        self.store = LocalDirStore(tmp_path / "store")
        self.registry = Registry.open(RegistrySettings(url=f"sqlite:///{tmp_path / 'r.sqlite3'}"))
        self.bus = InMemoryBus()
        self.service = RegisterService(self.store, self.registry, self.bus)

    def arrivals(self):
        from obsingest.messages import ArrivalEvent

        return [ArrivalEvent.decode(m.data) for m in self.bus.topics["ccd-arrivals"]]

    def deliver_all(self):
        from obsingest.store.notifications import from_storage_cloudevent

        outcomes = []
        outbox = self.store.outbox()
        for path, event in outbox.pending():
            outcomes.append(self.service.handle(from_storage_cloudevent(event, event["data"])))
            outbox.ack(path)
        return outcomes


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.registry.close()


@pytest.fixture
def did():
    return DataId("LSSTComCam", 2026112200001, 3)
